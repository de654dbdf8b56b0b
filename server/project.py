"""Which files are model files, their project root and their pyproject settings.

Torch-free and cheap: it runs on every open and change. The rules are the CLI's
(``exportlens.discover``): a file is exported when its text mentions a declaration
form or pyproject's ``[tool.exportlens] targets`` names it; the root is the folder of
the nearest pyproject.toml or .git.
"""

from __future__ import annotations

import os
import re

from exportlens.core.targets import find_pyproject, pyproject_targets
from exportlens.discover import settings_for
from exportlens.server.config import ProjectSettings

# The same rule as exportlens.discover's file filter, applied to the buffer's text.
_DECLARES = re.compile(r"\bexample_args\b|exportlens\.target|@target\b|from exportlens import")


def root_of(path: str) -> str:
    """The folder of the nearest pyproject.toml or .git above ``path``, else its folder."""
    directory = os.path.dirname(os.path.abspath(path))
    probe = directory
    while True:
        if os.path.exists(os.path.join(probe, "pyproject.toml")) or os.path.exists(os.path.join(probe, ".git")):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return directory
        probe = parent


def declares_targets(path: str, text: str) -> bool:
    """The file declares a target (in its text, or in pyproject's ``targets``)."""
    if _DECLARES.search(text):
        return True
    pyproject = find_pyproject(path)
    if not pyproject:
        return False
    entries, _ = pyproject_targets(pyproject)
    real = os.path.realpath(path)
    return any(os.path.realpath(entry.rpartition(":")[0]) == real for entry in entries)


def project_settings(path: str) -> ProjectSettings:
    s = settings_for(path)
    return ProjectSettings(timeout_s=s.timeout_s, memory_mb=s.memory_mb, strict=s.strict)


def pyproject_of(path: str) -> str | None:
    return find_pyproject(path)
