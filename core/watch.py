"""Files changed outside the editor: git checkout, formatters, the helper modules a
model imports, the files it reads. No LSP and no torch: the language server and
``check --watch`` (``exportlens/watch_command.py``) both watch through it.

A watchdog observer watches, non-recursively, only the folders that matter: those
of the open model files, of the dependencies their last export recorded (local
modules, found or looked for, and project files it read), and of their
pyproject.toml. (A recursive watch of a whole repository can exhaust the inotify
watch limit; a handful of folders cannot.) Only Python files, pyproject.toml and the
named dependency files are reported, and a folder only when it holds a dependency
(``pkg/`` appearing, with the ``pkg/__init__.py`` an import looked for). Events
arrive on watchdog's thread and are handed to the event loop, where bursts are
coalesced: an editor's atomic save (write a temporary file, rename it over the
original) or a checkout touching many files becomes one call with the set of
changed paths.

If the native observer cannot start (inotify limits), the watcher switches to
watchdog's PollingObserver and says so once.

Which changes make a result stale is decided here too (``stale_by``), and which
changes an export made itself (``self_caused``): a model that writes ``gen.py`` next
to itself would otherwise be exported again for the change its own export made,
forever.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Callable, Iterable

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

from exportlens.core.contract.snapshot import SNAPSHOT_NAME
from exportlens.core.disk.states import file_state
from exportlens.core.model.results import FileResult

log = logging.getLogger(__name__)

COALESCE_S = 0.15
POLL_INTERVAL_S = 1.0


def interesting(path: str) -> bool:
    name = os.path.basename(path)
    # The signature snapshot: what is shown for every model of the project depends on it.
    return name.endswith((".py", ".ipynb")) or name in ("pyproject.toml", SNAPSHOT_NAME)


def _folders_of(files: frozenset[str]) -> frozenset[str]:
    """Every folder above each file (a dependency may be in a folder not created yet)."""
    out: set[str] = set()
    for f in files:
        parent = os.path.dirname(f)
        while parent not in out and parent != os.path.dirname(parent):
            out.add(parent)
            parent = os.path.dirname(parent)
    return frozenset(out)


def self_caused(paths: set[str], results: Iterable[FileResult]) -> set[str]:
    """The changed paths that still hold what an export left in them: the export's
    own doing, not a reason to export anything again."""
    left: dict[str, set[str]] = {}
    for result in results:
        for path, state in zip(result.written, result.written_hashes, strict=False):
            left.setdefault(path, set()).add(state)
    return {p for p in paths if p in left and file_state(p) in left[p]}


def stale_by(result: FileResult | None, path: str, pyproject: str | None, paths: set[str]) -> set[str]:
    """The changed (real) ``paths`` that make ``result``, the last one of the open file
    ``path``, stale: its pyproject.toml, a dependency, or a folder holding one (a
    package folder created, renamed or removed). Never the file itself (its buffer,
    not the disk, is the truth) nor what its own last export wrote (whatever the
    bytes: the export writes them again each time, which must not loop)."""
    own = os.path.realpath(path)
    stale = {p for p in paths if pyproject is not None and p == os.path.realpath(pyproject)}
    if result is not None:
        deps = {os.path.realpath(p) for p in result.local_imports} - {own}
        stale |= deps & paths
        stale |= {p for p in paths if any(d.startswith(p + os.sep) for d in deps)}
        stale -= set(result.written)
    return stale - {own}


def changed_since(result: FileResult, path: str, overlaid: Iterable[str] = (), watched: Iterable[str] = ()) -> list[str]:
    """The dependencies of ``result`` (of the file ``path``) whose bytes on disk are no
    longer those its export read: a change made while the export ran, before the
    watcher knew the file mattered, which no file event will report again. Hashes
    them, so it runs off the event loop. Real paths, as file events report them.
    ``overlaid``: modules the export ran from their unsaved editor text, not from
    disk (their recorded state is the text's: the disk's differs, and always will).
    ``watched``: dependencies the watcher already knew when the export began (the
    shown result's): a change to one raises a file event, which exports the file
    again by itself -- counted here too, a helper restored right after a result was
    exported twice for one change."""
    own, written = os.path.realpath(path), set(result.written)
    skipped = {os.path.realpath(p) for p in (*overlaid, *watched)}
    changed = []
    for dep, seen in zip(result.local_imports, result.local_import_hashes, strict=False):
        real = os.path.realpath(dep)
        if real == own or dep in written or real in skipped:
            continue
        now = file_state(dep)
        if now is not None and seen and now != seen:
            changed.append(real)
    return changed


def dependency_folders(result: FileResult) -> set[str]:
    """The folder of each dependency, or its nearest existing ancestor (the import
    looked for ``pkg/__init__.py`` and there is no ``pkg/`` yet)."""
    out = set()
    for dep in result.local_imports:
        folder = os.path.dirname(dep)
        while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
            folder = os.path.dirname(folder)
        out.add(folder)
    return out


class _Handler(FileSystemEventHandler):
    def __init__(self, note: Callable[[set[str]], None]) -> None:
        self._note = note
        # Replaced whole (never mutated) from the event loop, read on watchdog's thread.
        self.files: frozenset[str] = frozenset()
        self.folders: frozenset[str] = frozenset()

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        paths = {os.fsdecode(event.src_path)}
        dest = getattr(event, "dest_path", "")
        if dest:
            paths.add(os.fsdecode(dest))  # an atomic save: the original is the rename's target
        if event.is_directory:
            # Created, removed or renamed; not "modified", which only says that a
            # file in it changed (reported on its own).
            found = paths & self.folders if event.event_type in ("created", "deleted", "moved") else set()
        else:
            files = self.files
            found = {p for p in paths if interesting(p) or p in files}
        if found:
            log.debug("file event %s %s", event.event_type, sorted(found))
            self._note(found)


class Watcher:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_changes: Callable[[set[str]], None],
        on_warning: Callable[[str], None],
        observer_factory: Callable[[], Any] = Observer,
        coalesce_s: float = COALESCE_S,
    ) -> None:
        self._loop = loop
        self._on_changes = on_changes
        self._on_warning = on_warning
        self._factory = observer_factory
        self._coalesce_s = coalesce_s
        self._observer: Any = None
        self._watches: dict[str, Any] = {}
        self._pending: set[str] = set()
        self._flush: asyncio.TimerHandle | None = None
        self._handler = _Handler(self._from_thread)
        self.polling = False

    def watch(self, directories: set[str], files: set[str] | None = None) -> None:
        """Watch exactly these folders from now on (missing ones are skipped), and
        report changes to ``files`` (real paths) in them besides Python files."""
        if files is not None:
            self._handler.files = frozenset(files)
            self._handler.folders = _folders_of(self._handler.files)
        wanted = {os.path.realpath(d) for d in directories if os.path.isdir(d)}
        if self._observer is None:
            if not wanted:
                return
            self._start(self._factory)
        for directory in set(self._watches) - wanted:
            try:
                self._observer.unschedule(self._watches.pop(directory))
            except (KeyError, OSError, RuntimeError):
                pass
        for directory in sorted(wanted - set(self._watches)):
            try:
                self._watches[directory] = self._observer.schedule(self._handler, directory, recursive=False)
            except OSError as e:
                if self.polling:
                    log.warning("cannot watch %s: %s", directory, e)
                    continue
                self._fall_back(e)
                return self.watch(wanted)

    @property
    def directories(self) -> set[str]:
        return set(self._watches)

    def close(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
        observer, self._observer = self._observer, None
        self._watches.clear()
        if observer is not None:
            try:
                observer.stop()
                observer.join(timeout=2)
            except (OSError, RuntimeError):
                pass

    # ---- internals

    def _start(self, factory: Callable[[], Any]) -> None:
        try:
            observer = factory()
            observer.start()
        except OSError as e:
            if self.polling:
                raise
            self._fall_back(e)
            return
        self._observer = observer

    def _fall_back(self, error: OSError) -> None:
        """Switch to polling (once) and re-watch what was watched."""
        self._on_warning(f"exportlens cannot watch files natively ({error}); it polls them every {POLL_INTERVAL_S:g} s instead. Raising fs.inotify.max_user_watches / max_user_instances fixes this.")
        old, self._observer = self._observer, None
        self._watches.clear()
        if old is not None:
            try:
                old.stop()
            except (OSError, RuntimeError):
                pass
        self.polling = True
        self._start(lambda: PollingObserver(timeout=POLL_INTERVAL_S))

    def _from_thread(self, paths: set[str]) -> None:
        try:
            self._loop.call_soon_threadsafe(self._note, paths)
        except RuntimeError:
            pass  # the loop is closed: the server is exiting

    def _note(self, paths: set[str]) -> None:
        self._pending |= {os.path.realpath(p) for p in paths}
        if self._flush is None:
            self._flush = self._loop.call_later(self._coalesce_s, self._deliver)

    def _deliver(self) -> None:
        self._flush = None
        paths, self._pending = self._pending, set()
        if paths:
            try:
                self._on_changes(paths)
            except Exception:  # noqa: BLE001 - a handler bug must not stop watching
                log.exception("handling file changes failed")
