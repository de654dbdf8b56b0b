"""Which files are model files, and the project each belongs to. Torch-free.

Cheap, because the server asks on every open and change, and ``check`` asks for
every ``.py`` file and notebook (``.ipynb``: its code cells, ``notebooks.py``) under
the folders it is given. A file is a model file when its text mentions a declaration form (``example_args``, ``exportlens.target``/``@target``)
or pyproject's ``[tool.exportlens] targets`` names it. Files named explicitly to
``survey`` are always checked, so their syntax errors are reported, and so is a
file in a folder that cannot be read (the check then says it cannot read it, rather
than skipping it silently). Only regular files are ever opened: a FIFO named
``*.py`` would block the read forever.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field, replace

from exportlens.core.model.results import Diagnostic, FileResult
from exportlens.core.project import notebooks
from exportlens.core.project.declarations import DECLARES, DECLARES_TEXT
from exportlens.core.project.notebooks import NotebookError
from exportlens.core.project.settings import find_pyproject, settings_for, target_problems

SKIP_DIRS = {".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", "site-packages", ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist", ".tox"}


@dataclass
class Survey:
    """What ``check PATHS`` has to do."""

    files: list[str] = field(default_factory=list)  # to check, sorted, each once
    refused: list[tuple[str, str]] = field(default_factory=list)  # (path as given, why it cannot be checked)
    # One result per pyproject.toml whose ``targets`` name files that are not there
    # (or not the project's): ``target-error`` diagnostics at the entries' lines.
    declarations: list[FileResult] = field(default_factory=list)


def without_declared(results: list[FileResult], declarations: list[FileResult]) -> list[FileResult]:
    """``results`` without the diagnostics the ``declarations`` results already say: a
    model file's export reports its pyproject.toml's problem (located there) as
    ``check`` does for the pyproject itself; a report says it once, in pyproject.toml."""
    said = {(os.path.realpath(r.path), d.code, d.line, d.message) for r in declarations for d in r.diagnostics}
    if not said:
        return results
    out = []
    for r in results:
        kept = tuple(d for d in r.diagnostics if d.path is None or (os.path.realpath(d.path), d.code, d.line, d.message) not in said)
        out.append(r if len(kept) == len(r.diagnostics) else replace(r, diagnostics=kept))
    return out


def survey(paths: list[str]) -> Survey:
    """The files to check: files as given, and the model files under folders (skipping
    virtual environments, caches, hidden folders and anything that is not a regular
    file); the given paths that cannot be checked; the pyproject.toml files that
    apply, with their ``targets`` entries that name no file."""
    out = Survey()
    pyprojects: dict[str, None] = {}
    for p in paths:
        try:
            mode = os.stat(p).st_mode
        except (FileNotFoundError, NotADirectoryError):
            out.refused.append((p, "no such file or directory"))
            continue
        except OSError as e:
            out.refused.append((p, e.strerror or str(e)))
            continue
        if stat.S_ISREG(mode):
            out.files.append(os.path.abspath(p))
            pyprojects.update(dict.fromkeys(filter(None, [find_pyproject(p)])))
        elif stat.S_ISDIR(mode):
            pyprojects.update(dict.fromkeys(filter(None, [find_pyproject(os.path.join(p, "_"))])))
            out.files.extend(_model_files(p, pyprojects))
        else:
            out.refused.append((p, f"not a regular file or a folder (a {_kind(mode)}); exportlens checks Python files and notebooks"))
    out.files = sorted(dict.fromkeys(out.files))
    out.declarations = [r for r in map(_declaration_result, pyprojects) if r is not None]
    return out


def _model_files(folder: str, pyprojects: dict[str, None]) -> list[str]:
    found = []
    for directory, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        if "pyproject.toml" in names and os.path.isfile(os.path.join(directory, "pyproject.toml")):  # never a FIFO
            pyprojects.setdefault(os.path.abspath(os.path.join(directory, "pyproject.toml")))
        for name in sorted(names):
            if name.endswith((".py", notebooks.SUFFIX)):
                full = os.path.abspath(os.path.join(directory, name))
                if _declares(full):
                    found.append(full)
    return found


def _declares(path: str) -> bool:
    """A file under a checked folder is checked: when it declares targets, and when it
    cannot be read (the check reports that). Not a FIFO, a socket or a device, which
    ``os.walk`` lists among files: opening one could block forever."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return False  # gone since the folder was listed (or a dangling link)
    except OSError:
        return os.path.isfile(path)  # a regular file it cannot read: say so
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        try:
            data = f.read()
        except OSError:
            return True
    return declares_targets(path, data)


def _kind(mode: int) -> str:
    kinds = {stat.S_ISFIFO: "FIFO", stat.S_ISSOCK: "socket", stat.S_ISCHR: "character device", stat.S_ISBLK: "block device"}
    return next((name for test, name in kinds.items() if test(mode)), "special file")


def _declaration_result(pyproject: str) -> FileResult | None:
    problems = target_problems(pyproject)
    if not problems:
        return None
    return FileResult(path=pyproject, diagnostics=tuple(Diagnostic("target-error", p.message, p.line, p.column) for p in problems))


def declares_targets(path: str, text: str | bytes) -> bool:
    """The file declares a target: in its text (on disk or an editor's buffer), or in
    pyproject's ``[tool.exportlens] targets``."""
    if notebooks.is_notebook(path) and isinstance(text, bytes):
        # A notebook on disk: its code cells, not its JSON (a markdown cell's words).
        try:
            if notebooks.read(path, text).spans:
                return True
        except NotebookError:
            return True  # checked, so the check says it is no notebook
    elif DECLARES.search(text) if isinstance(text, bytes) else DECLARES_TEXT.search(text):
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
