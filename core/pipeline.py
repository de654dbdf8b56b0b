"""The one path from a model file to its result, for ``exportlens check`` and the
language server alike: build the request from ``[tool.exportlens]`` and the caller's
overrides, pick the result cache, look the request up, export what missed, store.
Torch-free.

It lives in one place because two copies drifted: the server once ignored
``[tool.exportlens] cache_dir`` while the CLI honoured it. The CLI calls ``run``,
which starts a worker pool only when something missed. The server keeps its own
asyncio bridge to the pool (``exportlens.server.workers``) and calls ``request`` on
its event loop and ``lookup``/``store`` from threads of its own (lookups, stores).

After a lookup or an export, ``compare`` checks the result against the project's
signature snapshot (``exportlens.core.contract``): ``run`` does it for the CLI, the
server calls it before it publishes. The comparison is never cached, since the
snapshot changes independently of the model.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol, TypeVar

from exportlens.core.cache.remote import RemoteStore, secret_from_env
from exportlens.core.cache.store import ResultCache, default_cache_dir
from exportlens.core.contract import check
from exportlens.core.contract.snapshot import SnapshotError, file_key, snapshot_path
from exportlens.core.contract.snapshot import read as read_snapshot
from exportlens.core.disk.states import file_state
from exportlens.core.isolation import startmethod
from exportlens.core.isolation.startmethod import StartMethod
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.model.results import FileResult
from exportlens.core.project import notebooks
from exportlens.core.project.files import root_of
from exportlens.core.project.settings import (
    DEFAULT_LOWER,
    DEFAULT_MEMORY_MB,
    DEFAULT_STRICT,
    DEFAULT_TIMEOUT_S,
    DEFAULT_WEIGHTS,
    ProjectSettings,
    settings_for,
)

if TYPE_CHECKING:
    from exportlens.core.isolation.pool import PoolEvent, WorkerPool

log = logging.getLogger("exportlens.pipeline")

T = TypeVar("T")


@dataclass(frozen=True)
class Overrides:
    """What the caller sets above ``[tool.exportlens]``: CLI flags, or the settings
    the user gave explicitly in the editor. None: not set, so pyproject decides,
    then the default."""

    timeout_s: float | None = None
    memory_mb: int | None = None
    strict: bool | None = None
    cache: bool = True  # False: neither read nor write the result cache
    cache_dir: str | None = None  # --cache-dir, or the editor's cacheDir
    cache_url: str | None = None  # --cache-url, or the editor's cacheUrl; "" turns the shared cache off
    cache_write: bool | None = None  # --cache-write (the editor: its cacheWrite, never pyproject's)
    lower: tuple[str, ...] | None = None  # --lower, or the editor's lower; () lowers nothing
    keep_lowered: tuple[str, ...] = ()  # --save-onnx, --save-pte: the formats whose lowered programs' bytes the results carry
    weights: str | None = None  # --weights, or the editor's weights: "auto" or "real"
    start_method: str | None = None  # --start-method, or the editor's startMethod: "auto", "fork" or "spawn"
    memory_budget: int | None = None  # --memory-budget: the most memory a lowered program may need, bytes


def limits_for(project: ProjectSettings, overrides: Overrides) -> tuple[Limits, bool]:
    """The limits and strict default of an export: override, then pyproject, then default."""
    timeout = _first(overrides.timeout_s, project.timeout_s, DEFAULT_TIMEOUT_S)
    memory = _first(overrides.memory_mb, project.memory_mb, DEFAULT_MEMORY_MB)
    strict = _first(overrides.strict, project.strict, DEFAULT_STRICT)
    return Limits(timeout_s=float(timeout), memory_mb=int(memory)), bool(strict)


def _first(*values: T | None) -> T:
    """The first value that is set (None is unset; 0 and False are values)."""
    return next(v for v in values if v is not None)


def cache_dir_for(project: ProjectSettings, overrides: Overrides) -> Path:
    """The result cache's folder, by priority: ``--cache-dir`` or the editor's
    ``cacheDir``, then ``$EXPORTLENS_CACHE_DIR``, then ``[tool.exportlens] cache_dir``,
    then ``$XDG_CACHE_HOME/exportlens`` (``default_cache_dir``)."""
    if overrides.cache_dir:
        return Path(overrides.cache_dir).expanduser().absolute()
    if not os.environ.get("EXPORTLENS_CACHE_DIR") and project.cache_dir:
        return Path(project.cache_dir)
    return default_cache_dir()  # the environment variable, else the XDG folder


def cache_url_for(project: ProjectSettings, overrides: Overrides) -> str | None:
    """The shared cache's URL, by priority: ``--cache-url`` or the editor's
    ``cacheUrl`` (empty: none), then ``$EXPORTLENS_CACHE_URL``, then
    ``[tool.exportlens] cache_url``; None when there is none."""
    if overrides.cache_url is not None:
        return overrides.cache_url or None
    return os.environ.get("EXPORTLENS_CACHE_URL") or project.cache_url or None


@dataclass(frozen=True)
class Batch:
    """What ``Pipeline.run`` returns."""

    results: list[FileResult]  # one per file, sorted by path
    hits: int  # how many of them came from the cache
    from_store: frozenset[str] = frozenset()  # the paths of those the shared cache served
    cached: frozenset[str] = frozenset()  # the paths of all of them (the folder's and the store's)


def _depending_on(result: FileResult, path: str) -> FileResult:
    if path in result.local_imports:
        return result
    state = file_state(path)
    return replace(result, local_imports=(*result.local_imports, path), local_import_hashes=(*result.local_import_hashes, state if state is not None else ""))


class RunListener(Protocol):
    """Hears a ``run`` as it goes (the CLI's progress line); called from the pool's thread too."""

    def target_begins(self, path: str, target: str | None, index: int | None, total: int | None, phase: str = "") -> None: ...

    def file_done(self, result: FileResult, cached: bool) -> None: ...


def _begins(listener: RunListener | None, paths: dict[int, str]) -> Callable[[PoolEvent], None] | None:
    """The pool's events as the listener's, by file path."""
    if listener is None:
        return None

    def on_event(event: PoolEvent) -> None:
        if event.kind == "begin" and event.request_id in paths:
            listener.target_begins(paths[event.request_id], event.target, event.index, event.total, event.phase)

    return on_event


class CacheFolders:
    """One ``ResultCache`` per folder and shared cache, so its per-request bookkeeping
    (a store only keeps a result whose inputs did not change since the lookup) sees
    both halves, and one ``RemoteStore`` per URL, so a store that failed is left
    alone by every cache that uses it. Outlives a ``Pipeline``: the server makes a
    new one when the editor's settings change."""

    def __init__(self, warn: Callable[[str], None] | None = None) -> None:
        self._by_folder: dict[tuple[Path, str | None, bool], ResultCache] = {}
        self._remotes: dict[tuple[str, bool], RemoteStore] = {}
        self._lock = threading.Lock()  # the server asks from its event loop and its io thread
        self.warn = warn

    def get(self, folder: Path, url: str | None = None, write: bool = False, warn: Callable[[str], None] | None = None) -> ResultCache:
        with self._lock:
            cache = self._by_folder.get((folder, url, write))
            if cache is None:
                remote = None
                if url is not None:
                    remote = self._remotes.get((url, write))
                    if remote is None:
                        remote = self._remotes[(url, write)] = RemoteStore(url, write=write, secret=secret_from_env(), warn=self.warn or warn)
                cache = self._by_folder[(folder, url, write)] = ResultCache(folder, remote=remote)
            return cache

    def remotes(self) -> list[RemoteStore]:
        """The shared caches in use, for the editor's status."""
        with self._lock:
            return list(self._remotes.values())


class Pipeline:
    """Requests, cache choice, lookup and store for one set of overrides. ``warn``
    hears each problem with the cache or the settings, without a prefix (it may be called from any thread); lookups
    and stores never raise: a cache that fails is a miss, not a failed check."""

    def __init__(self, overrides: Overrides | None = None, *, warn: Callable[[str], None] | None = None, caches: CacheFolders | None = None) -> None:
        self.overrides = overrides or Overrides()
        self.caches = caches or CacheFolders()
        self._warn = warn or log.warning
        self._reported: set[str] = set()  # each ignored setting is said once

    def request(self, path: str, *, id: int, source: str | None = None, overlays: tuple[tuple[str, str], ...] = ()) -> ExportRequest:
        """The request to export ``path`` (its editor text, when ``source`` is given;
        ``overlays``: (real path, text) of local modules open with unsaved text)."""
        project = settings_for(path)
        for why in project.ignored:
            if why not in self._reported:
                self._reported.add(why)
                self._warn(why)
        limits, strict = limits_for(project, self.overrides)
        if source is None and notebooks.is_notebook(path):
            source = self._notebook_text(path)
        lower = _first(self.overrides.lower, project.lower, DEFAULT_LOWER)
        weights = _first(self.overrides.weights, project.weights, DEFAULT_WEIGHTS)
        return ExportRequest(
            id=id, path=path, source=source, root=root_of(path), limits=limits, strict_default=strict,
            lower=tuple(lower), keep_lowered=tuple(f for f in self.overrides.keep_lowered if f in lower), weights=str(weights),
            overlays=tuple(sorted(overlays)),
            memory_budget=self.overrides.memory_budget
            if self.overrides.memory_budget is not None
            else project.memory_budget,
        )

    def _notebook_text(self, path: str) -> str | None:
        """The module a notebook on disk runs as (``core/project/notebooks.py``); None
        when it cannot be read as one: the job then says why, at line 1."""
        try:
            module = notebooks.read(path)
        except (OSError, notebooks.NotebookError):
            return None
        log.info("%s: %s", path, module.describe())
        return module.text

    def cache_dir(self, path: str) -> Path:
        """The cache folder for the file ``path`` (whether or not the cache is on)."""
        return cache_dir_for(settings_for(path), self.overrides)

    def start_method(self, path: str) -> StartMethod:
        """How workers started for the file ``path`` start their jobs: the override,
        then ``$EXPORTLENS_START_METHOD``, then its pyproject, then the platform's."""
        return startmethod.resolve(self.overrides.start_method, settings_for(path).start_method)

    def preload_dir(self, path: str) -> str | None:
        """Where the workers keep what they preload (``preload_record``) for the file
        ``path``: its cache folder; None with the cache off (then nothing outlives the pool)."""
        if not self.overrides.cache:
            return None
        try:
            return str(self.cache_dir(path))
        except Exception:  # noqa: BLE001 - no home folder...: the pool keeps it for its life
            return None

    def cache_for(self, path: str) -> ResultCache | None:
        """The cache for the file ``path``; None when it is off or unavailable."""
        if not self.overrides.cache:
            return None
        try:
            project = settings_for(path)
            url = cache_url_for(project, self.overrides)
            write = bool(_first(self.overrides.cache_write, project.cache_write, False))
            return self.caches.get(cache_dir_for(project, self.overrides), url, write, warn=self._warn)
        except Exception as e:  # noqa: BLE001 - no cache is slower, not broken (no home folder...)
            self._warn(f"the result cache is unavailable ({type(e).__name__}: {e}); exporting without it")
            return None

    def lookup(self, request: ExportRequest) -> FileResult | None:
        """The cached result of ``request``, or None: a miss, the cache off or failing."""
        return self.find(request)[0]

    def find(self, request: ExportRequest) -> tuple[FileResult | None, bool]:
        """``lookup``, and whether the shared cache served the result."""
        cache = self.cache_for(request.path)
        if cache is None:
            return None, False
        try:
            result, remote = cache.find(request)
        except Exception as e:  # noqa: BLE001 - a cache that fails is a miss
            self._warn(f"reading the cache failed ({type(e).__name__}: {e}); treating it as a miss")
            return None, False
        return (result, remote) if isinstance(result, FileResult) else (None, False)

    def recorded_ms(self, path: str) -> float | None:
        """The export time recorded with the cached result of the file ``path`` as it
        is now (the folder, then the shared cache), or None when none is cached: what
        ``check --shard`` balances by. Counts no hit and changes nothing."""
        cache = self.cache_for(path)
        if cache is None:
            return None
        try:
            return cache.recorded_ms(self.request(path, id=0))
        except Exception:  # noqa: BLE001 - no recorded time is not an error
            return None

    def store(self, request: ExportRequest, result: FileResult) -> None:
        """Keep ``result`` for ``request`` (the cache decides whether it is worth keeping)."""
        write = self.check_store(request, result)
        if write is not None:
            write()

    def check_store(self, request: ExportRequest, result: FileResult) -> Callable[[], None] | None:
        """``store`` in two halves: whether ``result`` may be kept, checked now (the
        file and its local imports as the export left them), and the function that
        writes it, to call now or later; None when nothing is to be written."""
        cache = self.cache_for(request.path)
        if cache is None:
            return None
        try:
            checked = cache.check(request, result)
        except Exception as e:  # noqa: BLE001 - a cache must never break an export
            self._warn(f"writing the cache failed ({type(e).__name__}: {e})")
            return None
        return None if checked is None else functools.partial(cache.write, checked)  # which logs, never raises

    def compare(self, result: FileResult) -> FileResult:
        """``result`` checked against its project's snapshot, when there is one:
        ``signature-changed`` diagnostics added (see ``exportlens.core.contract.check``).

        The snapshot file, there or not, becomes one of the result's dependencies
        (``local_imports``): what is shown depends on it, so the server, which watches
        an open file's dependencies, checks the file again when the snapshot is
        written, edited or deleted. (Only shown results carry it: the cache stores the
        result before it is compared.)"""
        root = root_of(result.path)
        path = snapshot_path(root)
        result = _depending_on(result, os.path.realpath(path))
        try:
            snapshot = read_snapshot(path)
        except SnapshotError as e:
            return check.with_diagnostics(result, [check.unreadable(path, str(e))])
        if snapshot is None:
            return result
        return check.check_file(result, snapshot.files.get(file_key(root, result.path)))

    def vanished(self, scopes: list[str], checked: list[str]) -> list[FileResult]:
        """For ``check``: results for the snapshot entries under ``scopes`` (the PATHs
        it was given) whose files were not ``checked`` -- deleted, or declaring
        nothing any more -- so their targets are reported as removed."""
        roots = {root_of(f) for f in checked} | {root_of(s if os.path.isfile(s) else os.path.join(s, "_")) for s in scopes}
        done = set(checked)
        out: list[FileResult] = []
        for root in sorted(roots):
            if settings_for(os.path.join(root, "_")).problem is not None:
                continue  # its declarations cannot be read: what is gone is unknown (the problem is reported)
            try:
                snapshot = read_snapshot(snapshot_path(root))
            except SnapshotError:
                continue  # reported on each checked file of the project
            if snapshot is not None:
                out += [r for r in check.vanished(snapshot, root, scopes, done) if r.path not in done]
                done |= {r.path for r in out}
        return out

    def run(self, paths: list[str], jobs: int | None = None, *, compare: bool = True, listener: RunListener | None = None, pool: WorkerPool | None = None) -> Batch:
        """Export every file, or take its result from the cache; workers (at most
        ``jobs``, default one per core) start only when some file missed. With
        ``compare``, each result is checked against its project's snapshot.
        ``listener`` hears each target begin and each file end; ``pool``, when
        given, is used (and left running) instead of a pool of this run's own:
        ``check --watch`` keeps its workers warm between runs."""
        results: list[FileResult] = []
        misses: dict[str, ExportRequest] = {}
        from_store: set[str] = set()
        cached: set[str] = set()
        for i, path in enumerate(dict.fromkeys(paths)):  # one request per path: results are matched by path
            request = self.request(path, id=i)
            hit, remote = self.find(request)
            if hit is not None:
                results.append(hit)
                cached.add(hit.path)
                if remote:
                    from_store.add(hit.path)
                if listener is not None:
                    listener.file_done(hit, True)
            else:
                misses[path] = request
        hits = len(results)
        if misses:
            # Imported here: a run served wholly from the cache never loads the pool.
            from exportlens.core.isolation.pool import WorkerPool

            workers = max(1, min(jobs or os.cpu_count() or 1, len(misses)))
            on_event = _begins(listener, {r.id: p for p, r in misses.items()})
            preload_dir = self.preload_dir(next(iter(misses)))
            method = self.start_method(next(iter(misses)))
            with contextlib.nullcontext(pool) if pool is not None else WorkerPool(jobs=workers, on_event=on_event, preload_dir=preload_dir, start_method=method) as running:
                if pool is not None:
                    pool.listen(on_event)
                for result in running.run(misses.values()):
                    results.append(result)
                    held = misses.get(result.path)
                    if held is not None:
                        self.store(held, result)
                    if listener is not None:
                        listener.file_done(result, False)
        if compare:
            results = [self.compare(r) for r in results]
        return Batch(sorted(results, key=lambda r: r.path), hits, frozenset(from_store), frozenset(cached))

    def clear(self, paths: list[str]) -> int:
        """Empty the cache folder of each file in ``paths`` (each folder once); the
        number of results removed. Nothing when the cache is off."""
        caches = {id(c): c for c in (self.cache_for(p) for p in paths) if c is not None}
        return sum(cache.clear() for cache in caches.values())
