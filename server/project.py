"""Which files are model files, their project root and their pyproject settings.

Torch-free and cheap: it runs on every open and change. The rules are the CLI's
(``exportlens.discover``): a file is exported when its text mentions a declaration
form or pyproject's ``[tool.exportlens] targets`` names it; the root is the folder of
the nearest pyproject.toml or .git.
"""

from __future__ import annotations

from exportlens.core.export.targets import find_pyproject
from exportlens.discover import declares_targets, root_of, settings_for
from exportlens.server.config import ProjectSettings

__all__ = ["declares_targets", "project_settings", "pyproject_of", "root_of"]


def project_settings(path: str) -> ProjectSettings:
    s = settings_for(path)
    return ProjectSettings(timeout_s=s.timeout_s, memory_mb=s.memory_mb, strict=s.strict)


def pyproject_of(path: str) -> str | None:
    return find_pyproject(path)
