"""``exportlens check --watch [PATH...]``: check, then check again what each save
changes, until Ctrl-C.

The same parts as the language server: its file watcher
(``exportlens.core.watch``, torch-free: watchdog on the folders that matter,
bursts coalesced, polling when inotify runs out), its staleness rule (``stale_by``:
a model file is checked again when it, a local module or file its last export
depended on, its ``pyproject.toml`` or the project's snapshot changes), the
pipeline and the result cache. The workers stay warm between rounds (one pool for
the whole session), so a save is answered in about torch's own export time.

Each round prints only what changed: the report of each file whose diagnostics or
signature differ from what was last printed (a file whose diagnostics went away
says so), then one summary line of the whole state. A change that touches no model
prints nothing. Ctrl-C (or SIGTERM) stops the watcher and every worker, and the
command exits with 130.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import sys
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING, Callable

from exportlens.core.model.results import FileResult
from exportlens.core.pipeline import Batch, Pipeline
from exportlens.core.project.files import SKIP_DIRS, root_of, survey, without_declared
from exportlens.core.project.settings import find_pyproject
from exportlens.core.watch import Watcher, changed_since, dependency_folders, self_caused, stale_by
from exportlens.progress import Progress
from exportlens.report import display_path, summary

if TYPE_CHECKING:
    from exportlens.core.isolation.pool import WorkerPool

INTERRUPTED = 130  # the shell's code for "ended by SIGINT"


class Session:
    """One ``check --watch``: the last result and printed report of each file."""

    def __init__(self, paths: list[str], pipeline: Pipeline, jobs: int | None, render: Callable[[list[FileResult]], str], progress: Callable[[int], Progress] | None) -> None:
        self.paths = paths
        self.pipeline = pipeline
        self.jobs = jobs
        self.render = render  # one file's report (diagnostics and signatures), as printed
        self.progress = progress  # a run's progress line (a context manager and listener), or None
        self.results: dict[str, FileResult] = {}  # real path -> last result
        self.shown: dict[str, object] = {}  # real path -> what its last printed report said
        self.files: list[str] = []
        # Watch what this round depends on; called before the summary says "watching",
        # so a save made as soon as it is read is seen.
        self.rewatch: Callable[[], None] = lambda: None
        # Hand changed paths to the next round as the watcher does.
        self.requeue: Callable[[set[str]], None] = lambda paths: None

    def round(self, pool: WorkerPool, changed: set[str] | None) -> None:
        """Check what ``changed`` makes stale (None: everything) and print what differs."""
        started = time.perf_counter()
        found = survey(self.paths)
        for p, why in found.refused:
            print(f"exportlens: {p}: {why}", file=sys.stderr)
        current = {os.path.realpath(f): f for f in found.files}
        if changed is None:
            todo = list(current.values())
        else:
            changed -= self_caused(changed, self.results.values())
            todo = [f for real, f in current.items() if self._stale(real, changed)]
        gone = [real for real in self.results if real not in current]
        if changed is not None and not todo and not gone:
            self.rewatch()  # a new folder may have appeared
            return
        batch = self._run(todo, pool)
        for real in gone:
            del self.results[real]
        fresh = {os.path.realpath(r.path): r for r in without_declared(batch.results, found.declarations)}
        # Removed targets (snapshot entries whose file is gone) and pyproject declarations
        # naming no file: whole-state results, recomputed every round.
        extra = {os.path.realpath(r.path): r for r in self.pipeline.vanished(self.paths, found.files) + found.declarations}
        self.results.update(fresh)
        stale_extra = [real for real in self.shown if real not in current and real not in extra]
        self.files = found.files
        if changed is not None:
            what = ", ".join(sorted(display_path(p) for p in changed)) or "files"
            print(f"[{time.strftime('%H:%M:%S')}] {what} changed: checked {len(todo)} file{'s' * (len(todo) != 1)}")
        printed = self._print_changes({**fresh, **extra}, stale_extra, initial=changed is None)
        every = sorted([*self.results.values(), *extra.values()], key=lambda r: r.path)
        same = "" if printed or changed is None else "the report is unchanged. "
        self.rewatch()
        # A dependency that changed while this round read it was not watched yet (the
        # round's results name it): no event will come, so the next round is due now.
        # Looked at once it is watched and before "watching" is said: a save made on
        # reading that is the watcher's to report, not a late change of this round.
        late = {p for real, result in fresh.items() for p in changed_since(result, real)}
        print(same + summary(every, time.perf_counter() - started, cached=batch.hits, from_store=len(batch.from_store)) + "; watching for changes (Ctrl-C to stop)")
        sys.stdout.flush()
        if late:
            self.requeue(late)

    def _stale(self, real: str, changed: set[str]) -> bool:
        last = self.results.get(real)
        if last is None or real in changed:
            return True  # a new model file, or the file itself
        return bool(stale_by(last, real, find_pyproject(real), changed))

    def _run(self, files: list[str], pool: WorkerPool) -> Batch:
        if self.progress is None or not files:
            return self.pipeline.run(files, self.jobs, pool=pool)
        with self.progress(len(files)) as listener:
            return self.pipeline.run(files, self.jobs, pool=pool, listener=listener)

    def _print_changes(self, fresh: dict[str, FileResult], gone: list[str], *, initial: bool) -> bool:
        printed = False
        for real, result in sorted(fresh.items(), key=lambda kv: kv[1].path):
            key = _said(result)
            if key == self.shown.get(real, _said(FileResult(result.path))):
                continue  # the same diagnostics and signatures (a file new and clean: nothing to say)
            self.shown[real] = key
            text = self.render([result])
            if text:
                print(text + "\n")
            elif not initial:
                print(f"{display_path(result.path)}: no diagnostics now\n")
            printed = True
        for real in gone:
            print(f"{display_path(real)}: no longer checked")
            del self.shown[real]
            printed = True
        return printed

    def watched(self) -> tuple[set[str], set[str]]:
        """The folders to watch (model files', their dependencies', each project
        root's, every folder under the PATHs where a new model file could appear)
        and the dependency files to report besides Python files."""
        folders: set[str] = set()
        files: set[str] = set()
        for f in self.files:
            folders.add(os.path.dirname(os.path.realpath(f)))
            folders.add(root_of(f))
        for result in self.results.values():
            folders |= dependency_folders(result)
            files |= {os.path.realpath(p) for p in result.local_imports}
        for p in self.paths:
            if os.path.isdir(p):
                for directory, dirs, _ in os.walk(p):
                    dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
                    folders.add(os.path.realpath(directory))
            else:
                folders.add(os.path.dirname(os.path.realpath(p)))
        return folders, files


def _said(result: FileResult) -> object:
    """What a file's report says, without the export times that change every run."""
    return (result.diagnostics, tuple((t.name, t.line, t.status, t.signature) for t in result.targets))


def watch(session: Session, jobs: int | None) -> int:
    """Run ``session`` until Ctrl-C or SIGTERM; the exit code (130)."""
    from exportlens.core.isolation.pool import WorkerError, WorkerPool  # torch-free

    changes: queue.Queue[set[str]] = queue.Queue()
    loop = asyncio.new_event_loop()
    watcher = Watcher(loop, changes.put, lambda m: print(f"exportlens: {m}", file=sys.stderr))
    thread = threading.Thread(target=loop.run_forever, name="exportlens-watch", daemon=True)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    pool = None
    try:
        thread.start()
        files = survey(session.paths).files
        preload_dir = session.pipeline.preload_dir(files[0]) if files else None
        method = session.pipeline.start_method(files[0]) if files else None
        pool = WorkerPool(jobs=max(1, min(jobs or os.cpu_count() or 1, len(files) or 1)), preload_dir=preload_dir, start_method=method)
        session.rewatch = lambda: _rewatch(loop, watcher, session)
        session.requeue = changes.put
        session.round(pool, None)
        while True:
            changed = changes.get()
            while not changes.empty():  # a burst that outlasted the watcher's coalescing
                changed |= changes.get_nowait()
            session.round(pool, changed)
    except KeyboardInterrupt:
        print("exportlens: stopped watching", file=sys.stderr)
        return INTERRUPTED
    except WorkerError as e:
        print(f"exportlens: {e}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGTERM, previous)
        loop.call_soon_threadsafe(watcher.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        if pool is not None:
            pool.close()  # every worker asked to exit, then killed after a grace


def _rewatch(loop: asyncio.AbstractEventLoop, watcher: Watcher, session: Session) -> None:
    """Watch what the last round depends on (the watcher lives on the loop's thread)."""
    folders, files = session.watched()
    done = threading.Event()

    def update() -> None:
        try:
            watcher.watch(folders, files)
        finally:
            done.set()

    loop.call_soon_threadsafe(update)
    done.wait()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the session as Ctrl-C does: workers closed
