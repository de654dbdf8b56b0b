"""What one export read and wrote in the project, seen from inside the job process.

A result is stale as soon as something it read changes, and the model's own
imports are only part of that: a model may read a config or a data file of its
project. An audit hook (``sys.addaudithook``) on ``open`` sees every file the job
process opens, whatever opens it (``open``, ``os.open``, ``pathlib``, numpy...);
renames, removals, links, truncations and ``utime``/``chmod`` show what it changed.

Audit hooks cannot be removed and run on every audited event of the process, so the
hook is installed only in the disposable job process (``run_job``), returns at once
for other events and for paths outside the project root, and hashes a project file
only the first time it is opened for reading -- before the read, so a file edited
during the export leaves a key that misses rather than a stale hit.

Files the job writes are not inputs (a model that writes ``gen.py`` and imports it
depends on its own code only), and are reported with the state the job left them
in, so the server can ignore the change it caused. Not seen: a file only tested for
existence (``os.path.exists``) and never opened, and environment variables.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any, Iterator

from exportlens.core.disk.own import package_folders
from exportlens.core.disk.states import ABSENT, file_state

_READ, _WRITE, _TOUCH = 0, 1, 2
# Event -> what it does to the path(s) among its arguments (see ``Recorder.on_event``).
_EVENTS = {
    "open": _READ,  # or _WRITE, by its mode or flags
    "os.rename": _WRITE,  # os.rename and os.replace: both ends change
    "os.remove": _WRITE,
    "os.truncate": _WRITE,
    "os.link": _WRITE,
    "os.symlink": _WRITE,
    "os.utime": _TOUCH,
    "os.chmod": _TOUCH,
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PENDING = ""  # a read being hashed: a nested open of the same path returns at once


class Recorder:
    """The project files one job read (with their state at the first read) and changed."""

    def __init__(self, root: str, model: str) -> None:
        spellings = {os.path.abspath(root), os.path.realpath(root)}
        self._model = os.path.abspath(model)  # in the first key already: never hashed here
        self.real_root = os.path.realpath(root)
        self._under = tuple(p.rstrip(os.sep) + os.sep for p in spellings)
        # Not the project's, even under its root: an environment or exportlens itself.
        outside = {sys.prefix, sys.base_prefix, sys.exec_prefix, *(folder for _, folder in package_folders())}
        self._outside = tuple(os.path.realpath(p).rstrip(os.sep) + os.sep for p in outside)
        self.reads: dict[str, str] = {}  # absolute path -> state before its first read
        self.written: set[str] = set()  # content written, renamed or removed
        self.touched: set[str] = set()  # metadata changed only
        self._paused = threading.local()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """exportlens's own reads in the job (pyproject.toml) are not the model's inputs."""
        self._paused.on = True
        try:
            yield
        finally:
            self._paused.on = False

    def on_event(self, kind: int, event: str, args: tuple[Any, ...]) -> None:
        # Most events name files outside the project (torch reads its own sources
        # hundreds of times an export): ``_project`` turns those away first.
        if event == "open":
            full = self._project(args[0])
            if full is not None:
                mode, flags = args[1], args[2]
                writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
                self._note(full, _WRITE if writes else _READ)
            return
        if event in ("os.rename", "os.link", "os.symlink"):
            targets = (args[0], args[1]) if event == "os.rename" else (args[1],)
            kind = _WRITE
        else:
            targets = (args[0],)
        for path in targets:
            full = self._project(path)
            if full is not None:
                self._note(full, kind)

    def _project(self, path: Any) -> str | None:
        """The absolute path, if it is in the project and not exportlens's own business."""
        if isinstance(path, str):
            name = path
        elif isinstance(path, (bytes, os.PathLike)):
            name = os.fsdecode(path)
        else:
            return None  # a file descriptor: opened by path first, or not ours to know
        if name.startswith(os.sep) and not name.startswith(self._under) and "/.." not in name:
            return None  # the common case, without normalising
        full = os.path.abspath(name)
        if not full.startswith(self._under) or full.startswith(self._outside) or full == self._model:
            return None
        if "__pycache__" in full or "site-packages" in full or "dist-packages" in full:
            return None
        if getattr(self._paused, "on", False):
            return None
        return full

    def _note(self, full: str, kind: int) -> None:
        if kind == _WRITE:
            self.written.add(full)
        elif kind == _TOUCH:
            self.touched.add(full)
        elif full not in self.reads and full not in self.written:
            self.reads[full] = _PENDING
            state = file_state(full)  # opens it again: that event finds it pending
            if state is None:
                del self.reads[full]  # a folder, a FIFO, no permission: not a dependency
            else:
                self.reads[full] = state

    def result(self, model: str, imports: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        """``(dependencies, written)``, each real path -> state: the run's module
        ``imports`` (their compiled bytes, or absent) and the files it read, without
        the model file itself, files outside the project and files it wrote; and the
        files it changed, with the state it left them in."""
        model_real = os.path.realpath(model)
        written = {p for p in map(self._project_path, self.written | self.touched) if p}
        written_content = {p for p in map(self._project_path, self.written) if p}
        deps: dict[str, str] = {}
        for path, state in [*imports.items(), *self.reads.items()]:
            real = self._project_path(path)
            if real and real != model_real and real not in written_content and state != _PENDING:
                deps.setdefault(real, state)  # the imports' compiled bytes come first
        left: dict[str, str] = {}
        for path in sorted(written - {model_real}):
            now = file_state(path)
            if now is not None:
                left[path] = now
        return dict(sorted(deps.items())), left

    def _project_path(self, path: str) -> str | None:
        """The real path, if it is the project's own file (not an environment's, not a cache's)."""
        real = os.path.realpath(path)
        if not real.startswith(self.real_root + os.sep) or real.startswith(self._outside):
            return None
        parts = real.split(os.sep)
        if "__pycache__" in parts or "site-packages" in parts or "dist-packages" in parts:
            return None
        return real


_active: Recorder | None = None
_installed = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # Runs on every audited event of the job process: a dict lookup for the rest.
    kind = _EVENTS.get(event)
    if kind is None or _active is None:
        return
    try:
        _active.on_event(kind, event, args)
    except Exception:  # noqa: BLE001 - an audit hook that raises would fail the model's open
        pass


def start(root: str, model: str) -> Recorder:
    """Record from now on, in this (job) process; the hook is installed once."""
    global _active, _installed
    _active = Recorder(root, model)
    if not _installed:
        sys.addaudithook(_audit)
        _installed = True
    return _active


def stop() -> None:
    """Stop recording (the hook stays, as it must, and returns at once)."""
    global _active
    _active = None


__all__ = ["ABSENT", "Recorder", "start", "stop"]
