"""Which files are model files, and the project each belongs to. Torch-free.

Cheap, because the server asks on every open and change, and ``check`` asks for
every ``.py`` file under the folders it is given. A file is a model file when its
text mentions a declaration form (``example_args``, ``exportlens.target``/``@target``)
or pyproject's ``[tool.exportlens] targets`` names it. Files named explicitly to
``walk`` are always checked, so their syntax errors are reported.
"""

from __future__ import annotations

import os
import re

from exportlens.core.project.settings import settings_for

SKIP_DIRS = {".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", "site-packages", ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist", ".tox"}
# A declaration form in a file's text; bytes for files on disk, str for editor buffers.
_DECLARES_TEXT = re.compile(r"\bexample_args\b|exportlens\.target|@target\b|from exportlens import")
_DECLARES = re.compile(_DECLARES_TEXT.pattern.encode())


def walk(paths: list[str]) -> tuple[list[str], list[str]]:
    """``(files to check, paths that do not exist)``: files as given, and the model
    files under folders (skipping virtual environments, caches and hidden folders)."""
    files: list[str] = []
    missing: list[str] = []
    for p in paths:
        if os.path.isfile(p):
            files.append(os.path.abspath(p))
        elif os.path.isdir(p):
            for directory, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
                for name in sorted(names):
                    if name.endswith(".py"):
                        full = os.path.abspath(os.path.join(directory, name))
                        if _declares(full):
                            files.append(full)
        else:
            missing.append(p)
    return sorted(dict.fromkeys(files)), missing


def _declares(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return False
    return declares_targets(path, data)


def declares_targets(path: str, text: str | bytes) -> bool:
    """The file declares a target: in its text (on disk or an editor's buffer), or in
    pyproject's ``[tool.exportlens] targets``."""
    found = _DECLARES.search(text) if isinstance(text, bytes) else _DECLARES_TEXT.search(text)
    if found:
        return True
    real = os.path.realpath(path)
    return any(os.path.realpath(e.rpartition(":")[0]) == real for e in settings_for(path).targets)


def root_of(path: str) -> str:
    """The project root: the folder of the nearest pyproject.toml or .git, else the file's folder."""
    directory = os.path.dirname(os.path.abspath(path))
    probe = directory
    while True:
        if os.path.exists(os.path.join(probe, "pyproject.toml")) or os.path.exists(os.path.join(probe, ".git")):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return directory
        probe = parent
