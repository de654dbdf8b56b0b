"""Files changed outside the editor: git checkout, formatters, the helper modules a
model imports.

A watchdog observer watches, non-recursively, only the folders that matter: those
of the open model files, of the local modules their last export imported, and of
their pyproject.toml. (A recursive watch of a whole repository can exhaust the
inotify watch limit; a handful of folders cannot.) Events arrive on watchdog's
thread and are handed to the event loop, where bursts are coalesced: an editor's
atomic save (write a temporary file, rename it over the original) or a checkout
touching many files becomes one call with the set of changed paths.

If the native observer cannot start (inotify limits), the watcher switches to
watchdog's PollingObserver and says so once.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Callable

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

log = logging.getLogger(__name__)

COALESCE_S = 0.15
POLL_INTERVAL_S = 1.0


def interesting(path: str) -> bool:
    name = os.path.basename(path)
    return name.endswith(".py") or name == "pyproject.toml"


class _Handler(FileSystemEventHandler):
    def __init__(self, note: Callable[[set[str]], None]) -> None:
        self._note = note

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type in ("opened", "closed_no_write"):
            return
        paths = {os.fsdecode(event.src_path)}
        dest = getattr(event, "dest_path", "")
        if dest:
            paths.add(os.fsdecode(dest))  # an atomic save: the original is the rename's target
        found = {p for p in paths if interesting(p)}
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

    def watch(self, directories: set[str]) -> None:
        """Watch exactly these folders from now on (missing ones are skipped)."""
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
