"""The async side of the worker pool: ``await bridge.export(request)``.

``exportlens.core.isolation.pool.WorkerPool`` is synchronous and selector based. It runs its
``serve`` loop in one dedicated thread; requests go in with the thread-safe
``submit``, results and events come back to the event loop with
``call_soon_threadsafe``. Cancelling the awaiting task cancels the request, which
kills its job process at once (nothing waits for it).

Workers start on the first export that missed the cache, or earlier with
``warm()`` (the server calls it at ``initialize`` when the workspace has a model
file: ``exportlens.server.warm_at_initialize``), and then stay warm. Like esbonio's child
process client, the bridge has an explicit state and
one ``_set_state`` that logs each transition.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import os
import threading
from typing import Callable

from exportlens.core.isolation.pool import PoolEvent, WorkerPool
from exportlens.core.isolation.startmethod import StartMethod
from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import FileResult
from exportlens.core.trace import mark
from exportlens.server import threads

log = logging.getLogger(__name__)


class BridgeState(enum.Enum):
    """The bridge's pool as a whole, as the server logs it (one worker process's own
    state is ``core.isolation.worker.WorkerState``)."""

    NOT_STARTED = "not-started"  # no export has needed a worker yet
    STARTING = "starting"  # importing torch and warming up
    READY = "ready"  # warm and idle
    BUSY = "busy"  # at least one export running
    ERRORED = "errored"  # workers fail to start; exports fail at once
    EXITED = "exited"  # closed


class BridgeClosed(Exception):
    """The pool was shut down (settings change, exit) while a request waited."""


class ExportBridge:
    def __init__(
        self,
        jobs: int = 1,
        on_event: Callable[[PoolEvent], None] | None = None,
        on_state: Callable[[BridgeState, BridgeState], None] | None = None,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.jobs = jobs
        self.state = BridgeState.NOT_STARTED
        self.starts = 0  # times a pool was started (shown by the status command)
        self._on_event = on_event
        self._on_state = on_state
        self._log_path = log_path
        self._pool: WorkerPool | None = None
        self.start_method: StartMethod | None = None  # the running pool's (``startmethod``)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._futures: dict[int, asyncio.Future[FileResult]] = {}
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None

    def next_id(self) -> int:
        return next(self._ids)

    @property
    def running(self) -> int:
        """Requests submitted and not answered yet."""
        return len(self._futures)

    async def export(self, request: ExportRequest, preload_dir: str | None = None, start_method: StartMethod | None = None) -> FileResult:
        """Run ``request`` on a warm worker. Cancel the awaiting task to kill the job.
        ``preload_dir``: where workers started now keep what they preload;
        ``start_method``: how they start their jobs (``startmethod``)."""
        pool = self._ensure_started(preload_dir, start_method)
        assert self._loop is not None
        future: asyncio.Future[FileResult] = self._loop.create_future()
        self._futures[request.id] = future
        self._busy_changed()
        mark(f"server: request {request.id} submitted")
        pool.submit(request)
        try:
            result = await future
            mark(f"server: request {request.id} answered")
            return result
        except asyncio.CancelledError:
            pool.cancel(request.id)  # kills the job; its late "cancelled" reply is dropped
            raise
        finally:
            self._futures.pop(request.id, None)
            self._busy_changed()

    def warm(self, preload_dir: str | None = None, start_method: StartMethod | None = None) -> None:
        """Start the workers now, before any request, so the first export finds torch
        imported (and, from ``preload_dir``, the libraries earlier workers preloaded).
        Nothing once the bridge was closed (the server is shutting down)."""
        if self.state is not BridgeState.EXITED:
            self._ensure_started(preload_dir, start_method)

    async def close(self) -> None:
        """Stop the pool and its thread; requests still waiting fail with BridgeClosed."""
        pool, thread = self._pool, self._thread
        self._pool, self._thread = None, None
        for future in self._futures.values():
            if not future.done():
                future.set_exception(BridgeClosed("the workers were stopped"))
        if pool is None:
            self._set_state(BridgeState.EXITED)  # a warm-up still to come must not start one
            return
        self._stop.set()
        pool.wake()
        # Joining and killing workers takes up to a few seconds: not on the event loop.
        await threads.on_thread(threads.POOL_CLOSE, _shutdown, pool, thread)
        self._set_state(BridgeState.EXITED)

    def close_now(self) -> None:
        """Synchronous close for process exit."""
        pool, thread = self._pool, self._thread
        self._pool, self._thread = None, None
        if pool is not None:
            self._stop.set()
            pool.wake()
            _shutdown(pool, thread)

    def worker_pids(self) -> list[int]:
        return self._pool.worker_pids() if self._pool else []

    # ---- internals

    def _ensure_started(self, preload_dir: str | None, start_method: StartMethod | None = None) -> WorkerPool:
        if self._pool is not None:
            return self._pool
        self._loop = asyncio.get_running_loop()
        self._stop = threading.Event()
        self.starts += 1
        mark("server: starting the workers")
        pool = WorkerPool(self.jobs, log_path=self._log_path, on_event=self._from_pool_thread, preload_dir=preload_dir, start_method=start_method)
        self.start_method = pool.start_method
        self._pool = pool
        self._set_state(BridgeState.STARTING)  # logged with the start method
        self._thread = threads.start(threads.POOL, self._serve, pool, self._stop)
        return pool

    def _serve(self, pool: WorkerPool, stop: threading.Event) -> None:
        loop = self._loop
        assert loop is not None
        try:
            for request_id, result in pool.serve(stop):
                loop.call_soon_threadsafe(self._resolve, request_id, result)
        except Exception as e:  # noqa: BLE001 - a pool bug must reach the log, not kill silently
            log.exception("the worker pool loop failed")
            try:
                loop.call_soon_threadsafe(self._pool_failed, pool, e)
            except RuntimeError:
                pass  # the loop is closed: the server is exiting

    def _from_pool_thread(self, event: PoolEvent) -> None:
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._handle_event, event)
            except RuntimeError:
                pass  # the loop is closed: the server is exiting

    def _resolve(self, request_id: int, result: FileResult) -> None:
        future = self._futures.get(request_id)
        if future is not None and not future.done():
            future.set_result(result)

    def _handle_event(self, event: PoolEvent) -> None:
        if event.kind == "ready":
            self._set_state(BridgeState.BUSY if self._futures else BridgeState.READY)
        elif event.kind in ("restart", "retired"):
            self._set_state(BridgeState.STARTING)
        elif event.kind == "gave-up":
            self._set_state(BridgeState.ERRORED)
        if self._on_event is not None:
            self._on_event(event)

    def _pool_failed(self, pool: WorkerPool, error: Exception) -> None:
        close = pool.close
        if self._pool is pool:
            self._pool, self._thread = None, None
            threads.start(threads.POOL_CLOSE, close)
        for future in self._futures.values():
            if not future.done():
                future.set_exception(BridgeClosed(f"the worker pool failed: {error}"))
        self._set_state(BridgeState.ERRORED)

    def _busy_changed(self) -> None:
        if self.state in (BridgeState.READY, BridgeState.BUSY):
            self._set_state(BridgeState.BUSY if self._futures else BridgeState.READY)

    def _set_state(self, state: BridgeState) -> None:
        if state is self.state:
            return
        old, self.state = self.state, state
        log.info("workers: %s -> %s", old.value, state.value)
        if self._on_state is not None:
            self._on_state(old, state)


def _shutdown(pool: WorkerPool, thread: threading.Thread | None) -> None:
    if thread is not None:
        thread.join(timeout=5)
    pool.close()
