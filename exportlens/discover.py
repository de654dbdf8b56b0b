"""Which files under the paths given to ``check`` declare targets. Torch-free.

A folder is walked for ``.py`` files (skipping virtual environments, caches and
hidden folders); a file is a candidate when its text mentions a declaration form
(``example_args``, ``exportlens.target``/``@target``) or pyproject names it. Files
named explicitly are always checked, so their syntax errors are reported.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from exportlens.core.export.targets import exportlens_section, find_pyproject, pyproject_targets

SKIP_DIRS = {".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", "site-packages", ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist", ".tox"}
# A declaration form in a file's text; bytes for files on disk, str for editor buffers.
_DECLARES_TEXT = re.compile(r"\bexample_args\b|exportlens\.target|@target\b|from exportlens import")
_DECLARES = re.compile(_DECLARES_TEXT.pattern.encode())


@dataclass(frozen=True)
class Settings:
    """Per-file settings from the nearest ``[tool.exportlens]``."""

    timeout_s: float | None = None
    memory_mb: int | None = None
    strict: bool | None = None
    cache_dir: str | None = None  # absolute; a relative setting is relative to the pyproject


def walk(paths: list[str]) -> tuple[list[str], list[str]]:
    """``(files to check, paths that do not exist)``."""
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
    pyproject = find_pyproject(path)
    if pyproject:
        entries, _ = pyproject_targets(pyproject)
        real = os.path.realpath(path)
        return any(os.path.realpath(e.rpartition(":")[0]) == real for e in entries)
    return False


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


def settings_for(path: str) -> Settings:
    pyproject = find_pyproject(path)
    if not pyproject:
        return Settings()
    section, _ = exportlens_section(pyproject)
    timeout = section.get("timeout")
    memory = section.get("memory_mb")
    strict = section.get("strict")
    cache_dir = section.get("cache_dir")
    return Settings(
        float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else None,
        int(memory) if isinstance(memory, int) and memory > 0 else None,
        strict if isinstance(strict, bool) else None,
        os.path.join(os.path.dirname(os.path.abspath(pyproject)), os.path.expanduser(cache_dir)) if isinstance(cache_dir, str) and cache_dir else None,
    )
