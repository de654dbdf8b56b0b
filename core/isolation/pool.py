"""Run export requests on N warm workers, from a torch-free front end.

``WorkerPool`` starts ``python -m exportlens.core.isolation.zygote`` processes, hands each
one request at a time, and yields ``FileResult``s as they complete: ``run`` for a
fixed batch (the CLI), ``submit`` + ``serve`` for a stream of requests that keep
arriving from other threads (the language server). ``on_event`` reports workers
warming up, per-target progress and worker restarts. The workers
already turn a crash, hang or memory blow-up of the *model* into a diagnostic; the
pool handles the worker itself failing: it dies, sends garbage, or goes silent for
far longer than the limits allow. Then the worker is replaced and the request it
held becomes a ``worker-crash`` result. A worker may also die or hang importing a
library while idle (``Preloading`` named it, ``exportlens.core.isolation.speedups.preload``),
or retire (``Retiring``: a library it holds changed on disk, or made it unfit to
fork): the request it was handed meanwhile, whose job never started, goes to the
replacement instead, and nothing is lost. The pool records such a library as refused
in the preload record, where the replacement reads it; a retiring worker is no failure. When workers keep dying as
they start, or cannot be started at all (the interpreter is not executable), the
pool gives up: ``run`` raises WorkerError, ``serve`` answers each request at once.
Nothing here ever waits forever. One worker process (start, state, stop) is
``exportlens.core.isolation.worker``.

This module must not import torch (the CLI and the server use it).
"""

from __future__ import annotations

import collections
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from typing import IO, Callable, Iterable, Iterator, Literal

from exportlens.core.isolation import startmethod
from exportlens.core.isolation.jobclock import WALL_FACTOR, WARM_UP_S
from exportlens.core.isolation.messages import (
    Cancel,
    Export,
    Finished,
    JobStarted,
    Message,
    MessageError,
    Preloaded,
    Preloading,
    Retiring,
    TargetProgress,
    WorkerReady,
)
from exportlens.core.isolation.speedups import preload_record
from exportlens.core.isolation.waiting import Waiter, make_waiter
from exportlens.core.isolation.worker import CLOSE_GRACE_S, WorkerError, WorkerProcess, WorkerState, crash_result
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.model.results import FileResult

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 180.0  # importing torch on a cold disk can be slow
MAX_START_FAILURES = 3  # in a row, before the pool gives up on starting workers
# How often one request goes to another worker because the one it was handed retired
# (or failed importing a library) before starting it. Each such retirement refuses a
# library in the preload record, which the next worker reads, so the count stays small:
# a batch that imports onnxruntime and executorch sees each refused by both workers.
MAX_REQUEUES = 8
# A worker silent this long after naming the library module it imports is stuck in
# that import (one module with all it pulls in: seconds on a loaded machine).
PRELOAD_TIMEOUT_S = float(os.environ.get("EXPORTLENS_PRELOAD_TIMEOUT_S", "60"))


@dataclass(frozen=True)
class PoolEvent:
    """Something a front end may want to show while requests run.

    ``ready``: a worker finished warming up. ``begin``: request ``request_id`` starts
    exporting ``target`` (``index`` of ``total``, 1-based, when the worker knows), or
    moves on to its next ``phase`` ("tracing", "lowering: onnx"; "" at its start).
    ``restart``: a worker failed (``detail`` says why) and is being replaced.
    ``gave-up``: workers keep failing to start, or cannot be started at all
    (``detail`` says why); requests now fail at once. Said once per pool.
    ``retired``: a worker retired (``detail`` says why: a library it holds changed on
    disk...) and is being replaced. ``preloaded``: a worker imported libraries while
    idle (``detail``: how many modules, its memory before and after, refusals).
    """

    kind: Literal["ready", "begin", "restart", "gave-up", "retired", "preloaded"]
    request_id: int | None = None
    target: str | None = None
    index: int | None = None
    total: int | None = None
    detail: str = ""
    phase: str = ""


class WorkerPool:
    """``jobs`` warm workers. ``limits``, when given, replaces each request's limits.

    Use as a context manager; ``close()`` kills the workers. ``run`` yields results in
    completion order (sort them if you need a stable order). ``preload_dir``: the
    folder of the preload record (the cache folder), so that workers started later
    preload what these learned; None keeps it for this pool's life only.
    ``start_method``: fork or spawn, as the front end resolved it (None: as
    ``startmethod.resolve`` finds it with no setting: the environment, the platform).
    """

    def __init__(
        self,
        jobs: int,
        limits: Limits | None = None,
        log_path: str | os.PathLike[str] | None = None,
        on_event: Callable[[PoolEvent], None] | None = None,
        preload_dir: str | os.PathLike[str] | None = None,
        start_method: startmethod.StartMethod | None = None,
    ) -> None:
        self.jobs = max(1, jobs)
        # fork or spawn (``startmethod``): ``start_method`` is the front end's setting
        # (flag, editor, pyproject), then $EXPORTLENS_START_METHOD, then the platform's.
        self.start_method = start_method or startmethod.resolve()
        log.info("workers start jobs by %s", self.start_method)
        self.limits = limits
        self._log: IO[bytes] | int = open(log_path, "ab") if log_path else subprocess.DEVNULL
        self._lock = threading.Lock()  # cancel() and submit() may come from other threads
        self._workers: list[WorkerProcess] = []
        self._start_failures = 0
        self._gave_up: str | None = None  # why no worker can be started, once the pool gave up
        self._cancelled: set[int] = set()
        self._on_event = on_event
        self._inbox: collections.deque[ExportRequest] = collections.deque()
        # Requests held by a worker that failed before starting them: run them again.
        self._requeue: collections.deque[ExportRequest] = collections.deque()
        self._requeues: collections.Counter[int] = collections.Counter()
        self._own_dir = tempfile.mkdtemp(prefix="exportlens-preload-") if preload_dir is None else None
        self.record = preload_record.path_in(self._own_dir or preload_dir or "")
        # A self-pipe: submit() from another thread wakes serve() out of select().
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.closed = False
        for _ in range(self.jobs):
            worker = self._start_worker()
            if worker is None:
                break
            self._workers.append(worker)

    def listen(self, on_event: Callable[[PoolEvent], None] | None) -> None:
        """Report events to ``on_event`` from now on: a pool kept warm between
        batches (``check --watch``) reports each batch to its own listener."""
        self._on_event = on_event

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Block until every worker finished warming up (raises WorkerError)."""
        end = time.monotonic() + timeout
        while any(w.state is WorkerState.STARTING for w in self._workers) and self._gave_up is None:
            if time.monotonic() > end:
                raise WorkerError(f"workers not ready after {timeout:g} s")
            self._poll(min(0.5, max(0.0, end - time.monotonic())), {})
        self._raise_if_gave_up()

    def _raise_if_gave_up(self) -> None:
        if self._gave_up is not None:
            raise WorkerError(f"the export workers cannot start: {self._gave_up}")

    def run(self, requests: Iterable[ExportRequest]) -> Iterator[FileResult]:
        """Run every request; yield each one's FileResult as it completes.

        A request cancelled with ``cancel`` yields nothing. Raises WorkerError when
        the pool gave up on starting workers while requests were still waiting.
        """
        pending = collections.deque(self._limited(r) for r in requests)
        done: dict[int, FileResult] = {}
        while pending or self._requeue or any(w.request is not None for w in self._workers):
            if pending:
                # A batch that no worker can run is one error, not one result per file.
                self._raise_if_gave_up()
            self._step(pending, done)
            for _, result in self._collect(done):
                yield result

    def submit(self, request: ExportRequest) -> None:
        """Queue a request for ``serve`` (thread-safe; returns at once)."""
        with self._lock:
            self._inbox.append(request)
        self.wake()

    def wake(self) -> None:
        """Make a ``serve`` blocked in select() look at its inbox and stop flag now."""
        try:
            os.write(self._wake_w, b"\0")
        except (BlockingIOError, OSError):
            pass  # the pipe is full (a wake-up is pending anyway) or closed

    def serve(self, stop: threading.Event) -> Iterator[tuple[int, FileResult]]:
        """Run submitted requests until ``stop`` is set; yield ``(id, result)`` as each completes.

        Meant for one dedicated thread; ``submit``/``cancel`` come from others. Set
        ``stop`` then call ``wake`` to end it; call ``close`` after it returned.
        """
        pending: collections.deque[ExportRequest] = collections.deque()
        done: dict[int, FileResult] = {}
        while not stop.is_set() and not self.closed:
            with self._lock:
                while self._inbox:
                    pending.append(self._limited(self._inbox.popleft()))
            self._step(pending, done)
            if self._gave_up is not None:
                # The server stays up: each request gets its answer at once.
                while pending:
                    request = pending.popleft()
                    done[request.id] = crash_result(request, f"workers fail to start: {self._gave_up}")
            yield from self._collect(done)

    def cancel(self, request_id: int) -> None:
        """Stop a request: its job is killed, and ``run`` yields nothing for it."""
        with self._lock:
            self._cancelled.add(request_id)
            for worker in self._workers:
                if worker.request is not None and worker.request.id == request_id:
                    try:
                        worker.send(Cancel(request_id))
                    except OSError:
                        pass

    def worker_pids(self) -> list[int]:
        """The worker (zygote) processes' pids."""
        return [w.proc.pid for w in self._workers if w.state is not WorkerState.DEAD]

    def holds(self, request_id: int) -> bool:
        """Whether a worker was handed the request and has not answered it yet."""
        return any(w.request is not None and w.request.id == request_id for w in self._workers)

    def job_pid(self, request_id: int) -> int | None:
        """The pid of the job process running the request now, if one is."""
        for worker in self._workers:
            if worker.request is not None and worker.request.id == request_id:
                return worker.job_pid
        return None

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for worker in self._workers:
            worker.ask_to_exit()  # all at once: they exit in parallel
        for worker in self._workers:
            worker.kill(grace_s=CLOSE_GRACE_S)
        if not isinstance(self._log, int):
            self._log.close()
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def _limited(self, request: ExportRequest) -> ExportRequest:
        return replace(request, limits=self.limits) if self.limits else request

    def _emit(self, event: PoolEvent) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception:  # noqa: BLE001 - a front end's bug must not stop the pool
            pass

    def _step(self, pending: collections.deque[ExportRequest], done: dict[int, FileResult]) -> None:
        """Hand pending requests to idle workers, then wait briefly for events."""
        while self._requeue:
            pending.appendleft(self._requeue.pop())
        for worker in self._workers:
            while worker.state is WorkerState.IDLE and pending:
                request = pending.popleft()
                with self._lock:
                    if request.id in self._cancelled:
                        self._cancelled.discard(request.id)
                        continue
                self._dispatch(worker, request, done, more=bool(pending))
        self._poll(0.5, done)

    def _collect(self, done: dict[int, FileResult]) -> Iterator[tuple[int, FileResult]]:
        for request_id in list(done):
            result = done.pop(request_id)
            with self._lock:
                if request_id in self._cancelled:
                    self._cancelled.discard(request_id)
                    continue
            yield request_id, result

    def _dispatch(self, worker: WorkerProcess, request: ExportRequest, done: dict[int, FileResult], more: bool = False) -> None:
        """Hand ``request`` to ``worker``; ``more``: others of its batch wait behind it."""
        worker.request, worker.last_heard = request, time.monotonic()
        worker.set_state(WorkerState.BUSY, f"request {request.id}")
        try:
            with self._lock:
                worker.send(Export(request, more=more))
        except OSError:
            self._last_words(worker)
            self._replace(worker, worker.retiring or "it stopped reading its input", done)

    def _last_words(self, worker: WorkerProcess) -> None:
        """Read what a worker that stopped reading wrote before it went: a worker that
        retired while no request was running said so, and nobody read it yet."""
        try:
            while chunk := os.read(worker.out, 1 << 16):
                for message in worker.decoder.feed(chunk):
                    if isinstance(message, (Retiring, Preloading, Preloaded)):
                        self._handle(worker, message, {})
        except (OSError, MessageError):
            pass

    def _silence_limit(self, worker: WorkerProcess) -> float:
        # The worker kills a job within timeout_s of its own time after its last
        # event (at most WALL_FACTOR times that on the wall clock: ``jobclock``) and
        # reports progress on every target, so silence well past that means it is stuck.
        limits = worker.request.limits if worker.request else (self.limits or Limits())
        # A spawned job imports torch before its limit applies (``jobclock.WARM_UP_S``).
        warm_up = WARM_UP_S * WALL_FACTOR if self.start_method.method == "spawn" else 0.0
        return limits.timeout_s * WALL_FACTOR + 60.0 + warm_up

    def _poll(self, timeout: float, done: dict[int, FileResult]) -> None:
        inputs = make_waiter()  # select, or polling where pipes have no select (``waiting``)
        try:
            for worker in self._workers:
                if worker.state is not WorkerState.DEAD:
                    inputs.add(worker.out, worker)
            inputs.add(self._wake_r, None)
            for key in inputs.wait(timeout):  # each one read now: a poll's read is held by this waiter only
                if key is None:
                    self._drain_wake()
                else:
                    self._read(key, done, inputs)
        finally:
            inputs.close()
        now = time.monotonic()
        for worker in list(self._workers):
            if worker.state is WorkerState.STARTING and now - worker.started > READY_TIMEOUT_S:
                self._replace(worker, "it did not start in time", done)
            elif worker.preloading is not None and now - worker.last_heard > PRELOAD_TIMEOUT_S:
                self._replace(worker, f"it stopped responding (for over {PRELOAD_TIMEOUT_S:g} s)", done)
            elif worker.state is WorkerState.BUSY and now - worker.last_heard > self._silence_limit(worker):
                self._replace(worker, "it stopped responding", done)

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _read(self, worker: WorkerProcess, done: dict[int, FileResult], inputs: Waiter) -> None:
        chunks: list[bytes] = []
        open_ = inputs.read(worker.out, chunks.append, max_chunks=1)
        chunk = b"".join(chunks)
        if not chunk:
            if not open_:
                self._replace(worker, worker.retiring or _exit_text(worker), done)
            return
        worker.last_heard = time.monotonic()
        try:
            for message in worker.decoder.feed(chunk):
                self._handle(worker, message, done)
        except MessageError as e:
            self._replace(worker, f"it sent a bad message: {e}", done)

    def _handle(self, worker: WorkerProcess, message: Message, done: dict[int, FileResult]) -> None:
        # Whatever it says after ``Preloading``, it is no longer in that import.
        worker.preloading = message if isinstance(message, Preloading) else None
        if isinstance(message, Preloading):
            pass
        elif isinstance(message, Preloaded):
            self._preloaded(worker, message)
        elif isinstance(message, Retiring):
            worker.retiring = message.reason
        elif isinstance(message, WorkerReady):
            worker.set_state(WorkerState.BUSY if worker.request else WorkerState.IDLE, "warmed up")
            self._start_failures = 0
            self._emit(PoolEvent("ready", detail=f"pid {worker.proc.pid}, torch {message.torch}"))
        elif isinstance(message, Finished):
            request = worker.request
            if request is None or message.id != request.id:
                raise MessageError(f"a result for request {message.id} it does not hold")
            worker.request, worker.job_pid = None, None
            self._requeues.pop(request.id, None)
            worker.set_state(WorkerState.IDLE, f"request {request.id} done")
            if not message.cancelled:
                done[request.id] = message.result
        elif isinstance(message, JobStarted):
            worker.job_pid = message.pid
        elif isinstance(message, TargetProgress):
            # Also a heartbeat: last_heard is already updated.
            self._emit(PoolEvent("begin", request_id=message.id, target=message.target, index=message.index, total=message.total, phase=message.phase))
        else:
            raise MessageError(f"{type(message).__name__} is not a message a worker sends")

    def _preloaded(self, worker: WorkerProcess, message: Preloaded) -> None:
        detail = (
            f"pid {worker.proc.pid}: {message.modules} library modules ({', '.join(message.libraries) or 'none'}); "
            f"memory {message.rss_before_kb // 1024} -> {message.rss_kb // 1024} MB" + "".join(f"; refused {r}" for r in message.refused)
        )
        log.info("worker preloaded %s", detail)
        self._emit(PoolEvent("preloaded", detail=detail))

    def _replace(self, worker: WorkerProcess, why: str, done: dict[int, FileResult]) -> None:
        """Kill a failed (or retiring) worker, fail its request -- or run it again when
        the worker failed in its own business (preloading, retiring) before starting
        it --, start a new one in its place."""
        request = worker.request
        log.info("worker %d %s: %s", worker.proc.pid, "retires" if worker.retiring else "failed", why)
        if worker.state is WorkerState.STARTING:
            self._start_failures += 1
        worker.kill()
        if worker.preloading is not None and not worker.retiring:
            loading = worker.preloading
            reason = f"the worker {why.removeprefix('it ')} while importing {loading.module}"
            preload_record.refuse(self.record, loading.library, reason, loading.file, loading.state)
        index = self._workers.index(worker)
        own_business = worker.preloading is not None or worker.retiring is not None
        if request is not None and worker.job_pid is None and own_business and self._requeues[request.id] < MAX_REQUEUES:
            self._requeues[request.id] += 1
            self._requeue.append(request)
        elif request is not None:
            done[request.id] = crash_result(request, why)
        if not self.closed and self._start_failures >= MAX_START_FAILURES:
            self._give_up(why)
        replacement = None if self.closed or self._gave_up is not None else self._start_worker()
        if replacement is None:
            worker.request = None
            worker.set_state(WorkerState.DEAD, why)
            return
        self._emit(PoolEvent("retired" if worker.retiring else "restart", request_id=request.id if request else None, detail=why))
        self._workers[index] = replacement

    def _start_worker(self) -> WorkerProcess | None:
        """A new worker; None when its process cannot be started at all (the
        interpreter is not executable, or gone). A retry would fail the same way,
        so the pool gives up at once."""
        try:
            return WorkerProcess(self._log, self.record, self.start_method.method)
        except WorkerError as e:
            self._give_up(str(e))
            return None

    def _give_up(self, why: str) -> None:
        """No more workers: requests fail at once from now on; said once (``gave-up``)."""
        if self._gave_up is None:
            self._gave_up = why
            log.info("workers cannot start: %s", why)
            self._emit(PoolEvent("gave-up", detail=why))


def _exit_text(worker: WorkerProcess) -> str:
    """How a worker whose output ended went: its exit code or signal."""
    try:
        code = worker.proc.wait(timeout=2)  # its output ends as it exits: a moment at most
    except subprocess.TimeoutExpired:
        code = None
    if code is not None and code < 0:
        try:
            return f"it was killed by {signal.Signals(-code).name}"
        except ValueError:
            pass
    return f"it exited with code {code}"
