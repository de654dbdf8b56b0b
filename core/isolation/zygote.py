"""The warm export worker: ``python -m exportlens.core.isolation.zygote``.

One worker is a *zygote*: a single-threaded process that imports torch once, runs a
tiny export so lazy imports and caches are hot, and then forks one disposable child
per request. The child runs ``exportlens.core.export.job.run_job`` (the user's model code);
a crash, hang, ``sys.exit``, print storm or memory blow-up ends only that child.
Forking a warm zygote is what makes a job start in a fraction of a fresh
interpreter's time (``bench/bench_startmethod.py`` measures it). While idle, the zygote
forks the *next* job process ahead of time and lets it warm up (a tiny export pays the
fork's copy-on-write of torch's op tables): a request then starts in a warm process.
A request that arrives while that standby is still warming goes to a fresh fork.

Fork hazard: once a process has run an intra-op parallel (OpenMP) op, a forked
child that runs one deadlocks. The zygote therefore only ever touches tiny tensors
(below torch's parallel grain size) and keeps ``torch.set_num_threads(1)`` so that
nothing it runs can start the OpenMP pool; each child restores the thread count.

The messages it reads and writes are in ``exportlens.core.isolation.messages``.
"""

from __future__ import annotations

import collections
import gc
import os
import selectors
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any

from exportlens.core.isolation.failure import Failure, exit_text, failure_diagnostic
from exportlens.core.isolation.jobprocess import child_main, standby_main, warm_up
from exportlens.core.isolation.messages import (
    Cancel,
    Exit,
    Export,
    ExportRequest,
    Finished,
    FrameDecoder,
    FromJob,
    FromWorker,
    JobResult,
    JobStarted,
    MessageError,
    Progress,
    StandbyWarm,
    TargetBegins,
    TargetDone,
    TargetsFound,
    ToWorker,
    WorkerReady,
    encode,
    write_frame,
)
from exportlens.core.isolation.pipes import Tail, drain
from exportlens.core.isolation.procs import dump_stack, kill_group, rss_kb
from exportlens.core.model.results import Diagnostic, FileResult, TargetDecl, TargetResult
from exportlens.core.source.sourcemap import SourceIndex
from exportlens.core.source.spans import complete_range

MEMORY_POLL_S = 0.025


@dataclass
class Attempt:
    """What the zygote learned from one job process."""

    result: FileResult | None = None
    decls: list[TargetDecl] | None = None
    current: str | None = None  # the target in progress (last ``begin``)
    failure: str | None = None  # "timeout", "out-of-memory", "worker-crash"
    detail: str = ""
    dump: str = ""
    cancelled: bool = False
    # Targets the job finished before it died: (result, its diagnostics).
    done: list[tuple[TargetResult, list[Diagnostic]]] = field(default_factory=list)


@dataclass
class Merged:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    targets: dict[str, TargetResult] = field(default_factory=dict)
    decls: list[TargetDecl] | None = None


# Fork each job process ahead of its request (see ``standby_main``). Off with
# EXPORTLENS_STANDBY=0, e.g. to measure what it saves.
STANDBY = os.environ.get("EXPORTLENS_STANDBY", "1") != "0"


@dataclass
class _Job:
    """A forked job process and the worker's ends of its pipes."""

    pid: int
    events_r: int
    output_r: int
    dump_fd: int


@dataclass
class _Standby:
    job: _Job
    request_w: int  # the request goes here; closing it without one makes it exit


class Zygote:
    def __init__(self, fin: int, fout: int) -> None:
        self.fin = fin
        self.fout = fout
        self.inbox = FrameDecoder()
        self.queue: collections.deque[ExportRequest] = collections.deque()
        self.cancel_current = False
        self.current_id: int | None = None
        self.exiting = False
        self.num_threads = 1
        self.standby: _Standby | None = None

    def send(self, message: FromWorker) -> None:
        write_frame(self.fout, message)

    def read_input(self) -> None:
        """Read what is available on the protocol input and act on it."""
        chunk = os.read(self.fin, 1 << 16)
        if not chunk:
            self.exiting = True
            return
        try:
            messages = self.inbox.feed(chunk)
        except MessageError as e:
            # Our own front end sent something we cannot read: the stream may be out
            # of step, so stop; the pool replaces a worker that exits.
            print(f"exportlens worker: {e}; exiting", file=sys.stderr)
            self.exiting = True
            return
        for message in messages:
            self.handle(message)

    def handle(self, message: ToWorker | FromJob | FromWorker) -> None:
        if isinstance(message, Export):
            self.queue.append(message.request)
        elif isinstance(message, Cancel):
            if message.id == self.current_id:
                self.cancel_current = True
            for queued in list(self.queue):
                if queued.id == message.id:
                    self.queue.remove(queued)
                    self.send_cancelled(queued)
        elif isinstance(message, Exit):
            self.exiting = True
        else:
            print(f"exportlens worker: ignoring {type(message).__name__}, not a message for a worker", file=sys.stderr)

    def send_cancelled(self, request: ExportRequest) -> None:
        self.send(Finished(request.id, FileResult(path=request.path), cancelled=True))

    def serve(self) -> None:
        try:
            self._serve()
        finally:
            self.drop_standby()

    def _serve(self) -> None:
        while not self.exiting:
            if not self.queue:
                self.spawn_standby()
                self.read_input()
                continue
            request = self.queue.popleft()
            self.current_id, self.cancel_current = request.id, False
            result = self.run_request(request)
            self.current_id = None
            if result is None:
                if not self.exiting:
                    self.send_cancelled(request)
            else:
                self.send(Finished(request.id, result))

    def run_request(self, request: ExportRequest) -> FileResult | None:
        """Run the request's targets, re-forking past any target that kills its job."""
        started = time.monotonic()
        merged = Merged()
        skip = list(request.skip)
        tail = Tail()
        while True:
            attempt = self.run_child(replace(request, skip=tuple(skip)), tail)
            if attempt.cancelled:
                return None
            if attempt.decls is not None and merged.decls is None:
                merged.decls = attempt.decls
            if attempt.result is not None:
                return self.finish(request, merged, attempt.result, tail, started)
            for finished, found in attempt.done:
                merged.targets[finished.name] = finished
                merged.diagnostics.extend(found)
                skip.append(finished.name)
            diagnostic = self.diagnose(request, attempt, merged.decls, tail)
            merged.diagnostics.append(diagnostic)
            if attempt.current is None or attempt.current in skip:
                # Before any target started (or a repeat): a file-level failure, stop.
                empty = FileResult(path=request.path)
                return self.finish(request, merged, empty, tail, started)
            decl = self._decl(merged.decls, attempt.current)
            line = decl.line if decl else diagnostic.line
            merged.targets[attempt.current] = TargetResult(attempt.current, line, "error")
            skip.append(attempt.current)
            remaining = [d.name for d in merged.decls or () if d.name not in skip]
            if not remaining:
                empty = FileResult(path=request.path)
                return self.finish(request, merged, empty, tail, started)

    @staticmethod
    def _decl(decls: list[TargetDecl] | None, name: str | None) -> TargetDecl | None:
        return next((d for d in decls or () if d.name == name), None)

    def finish(
        self,
        request: ExportRequest,
        merged: Merged,
        last: FileResult,
        tail: Tail,
        started: float,
    ) -> FileResult:
        targets = dict(merged.targets)
        for t in last.targets:
            targets.setdefault(t.name, t)
        order = {d.name: i for i, d in enumerate(merged.decls or ())}
        ordered = sorted(targets.values(), key=lambda t: order.get(t.name, len(order)))
        index = _index_of(request) if merged.diagnostics else None
        own = tuple(complete_range(d, index) for d in merged.diagnostics) if index else ()
        return FileResult(
            path=last.path or request.path,
            diagnostics=own + tuple(last.diagnostics),
            targets=tuple(ordered),
            local_imports=last.local_imports,
            local_import_hashes=last.local_import_hashes,
            output_tail=tail.text(),  # the zygote saw all the output, the job none of it
            elapsed_ms=(time.monotonic() - started) * 1000,
        )

    def diagnose(self, request: ExportRequest, attempt: Attempt, decls: list[TargetDecl] | None, tail: Tail) -> Diagnostic:
        failure = Failure(attempt.failure or "worker-crash", attempt.current, attempt.detail, attempt.dump, tail.text())
        return failure_diagnostic(request, failure, self._decl(decls, attempt.current))

    def run_child(self, request: ExportRequest, tail: Tail) -> Attempt:
        """Run the request in a job process (the standby, else a new fork) and
        supervise it to its end."""
        attempt = Attempt()
        job = self.take_standby(request) or self.fork_job(request)
        self.send(JobStarted(request.id, job.pid))
        try:
            self.supervise(job.pid, request, attempt, job.events_r, job.output_r, tail)
        finally:
            kill_group(job.pid)
            drain(job.output_r, tail.add)
            for fd in (job.events_r, job.output_r):
                os.close(fd)
            size = os.fstat(job.dump_fd).st_size
            attempt.dump = os.pread(job.dump_fd, min(size, 1 << 20), 0).decode("utf-8", "replace")
            os.close(job.dump_fd)
        return attempt

    def _fork(self, child: Any) -> _Job:
        """Fork a job process running ``child(events_w, output_w, dump_fd)``."""
        events_r, events_w = os.pipe()
        output_r, output_w = os.pipe()
        dump_fd = os.memfd_create("exportlens-stack")
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            keep = self.standby.request_w if self.standby else -1
            for fd in (events_r, output_r, self.fin, self.fout, keep):
                if fd >= 0:
                    os.close(fd)
            child(events_w, output_w, dump_fd)
        os.close(events_w)
        os.close(output_w)
        try:
            os.setpgid(pid, pid)  # also done in the child; whichever runs first wins
        except OSError:
            pass
        os.set_blocking(events_r, False)
        os.set_blocking(output_r, False)
        return _Job(pid, events_r, output_r, dump_fd)

    def fork_job(self, request: ExportRequest) -> _Job:
        return self._fork(lambda events_w, output_w, dump_fd: child_main(request, events_w, output_w, dump_fd, self.num_threads))

    def spawn_standby(self) -> None:
        """Fork the next job process now, while nothing is waiting (see ``standby_main``)."""
        if self.standby is not None or not STANDBY:
            return
        request_r, request_w = os.pipe()

        def child(events_w: int, output_w: int, dump_fd: int) -> None:
            os.close(request_w)
            standby_main(request_r, events_w, output_w, dump_fd, self.num_threads)

        job = self._fork(child)
        os.close(request_r)
        self.standby = _Standby(job, request_w)

    def take_standby(self, request: ExportRequest) -> _Job | None:
        """Hand the request to the standby job process, if one is alive to take it."""
        standby, self.standby = self.standby, None
        if standby is None:
            return None
        try:
            done, _ = os.waitpid(standby.job.pid, os.WNOHANG)
            if not done and _ready(standby.job.events_r):
                write_frame(standby.request_w, Export(request))
                os.close(standby.request_w)
                return standby.job
        except OSError:
            pass
        self.drop_standby(standby)
        return None

    def drop_standby(self, standby: _Standby | None = None) -> None:
        standby = standby or self.standby
        if standby is None:
            return
        if standby is self.standby:
            self.standby = None
        kill_group(standby.job.pid)
        for fd in (standby.request_w, standby.job.events_r, standby.job.output_r, standby.job.dump_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def supervise(
        self,
        pid: int,
        request: ExportRequest,
        attempt: Attempt,
        events_r: int,
        output_r: int,
        tail: Tail,
    ) -> None:
        limits = request.limits
        memory_kb = limits.memory_mb * 1024
        deadline = time.monotonic() + limits.timeout_s
        next_poll = 0.0
        events = FrameDecoder()
        selector = selectors.DefaultSelector()
        selector.register(self.fin, selectors.EVENT_READ, "in")
        selector.register(events_r, selectors.EVENT_READ, "events")
        selector.register(output_r, selectors.EVENT_READ, "output")
        try:
            while True:
                for key, _ in selector.select(MEMORY_POLL_S):
                    if key.data == "in":
                        self.read_input()
                    elif key.data == "output":
                        # Bounded, so a model printing nonstop cannot starve the checks.
                        if not drain(output_r, tail.add, max_chunks=16):
                            selector.unregister(output_r)
                    else:
                        chunks: list[bytes] = []
                        open_ = drain(events_r, chunks.append)
                        try:
                            for message in events.feed(b"".join(chunks)):
                                if self.on_event(message, request, attempt):
                                    deadline = time.monotonic() + limits.timeout_s
                        except MessageError as e:
                            attempt.failure, attempt.detail = "worker-crash", f"after writing garbage to its event pipe ({e})"
                            return
                        if not open_:
                            selector.unregister(events_r)
                if attempt.result is not None:
                    return
                if self.exiting or self.cancel_current:
                    attempt.cancelled = True
                    return
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    try:
                        drain(events_r, lambda c: [self.on_event(m, request, attempt) for m in events.feed(c)])
                    except MessageError:
                        pass  # it is gone; what it managed to say stands
                    if attempt.result is None:
                        attempt.failure = "worker-crash"
                        attempt.detail = exit_text(status)
                    return
                if time.monotonic() > deadline:
                    attempt.failure = "timeout"
                    dump_stack(pid)
                    return
                now = time.monotonic()
                if now < next_poll:
                    continue
                next_poll = now + MEMORY_POLL_S
                if rss_kb(pid) > memory_kb:
                    attempt.failure = "out-of-memory"
                    dump_stack(pid)
                    return
        finally:
            selector.close()

    def on_event(self, message: FromJob | ToWorker | FromWorker, request: ExportRequest, attempt: Attempt) -> bool:
        """Record one job event; True when it starts a new timeout period."""
        if isinstance(message, TargetsFound):
            attempt.decls = list(message.targets)
            return True
        if isinstance(message, TargetBegins):
            attempt.current = message.target
            names = [d.name for d in attempt.decls or ()]
            index = names.index(message.target) + 1 if message.target in names else None
            # index/total let the front end show "exporting Counter (1/2)".
            self.send(Progress(request.id, message.target, index, len(names) or None))
            return True
        if isinstance(message, TargetDone):
            attempt.done.append((message.target, list(message.diagnostics)))
        elif isinstance(message, JobResult):
            attempt.result = message.result
        return False


def _ready(events_r: int) -> bool:
    """Whether the standby said it is warm (its first and only frame before a request)."""
    try:
        data = os.read(events_r, 4096)
    except BlockingIOError:
        return False
    return data == encode(StandbyWarm())


def _index_of(request: ExportRequest) -> SourceIndex:
    """The file's index, to give the worker's own diagnostics a full range."""
    text = request.source
    if text is None:
        try:
            with open(request.path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            text = ""
    return SourceIndex.build(text, request.path)


def main() -> None:
    # Keep the protocol on private fds: whatever the model (or torch) prints goes to
    # fd 2, the worker's log, never into the frame stream.
    fin, fout = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    import torch

    num_threads = torch.get_num_threads()
    version = warm_up()
    # Everything alive now is shared with every job process; keep the collector from
    # writing to those objects' headers in the jobs (copy-on-write of torch's heap).
    gc.collect()
    gc.freeze()
    zygote = Zygote(fin, fout)
    zygote.num_threads = num_threads
    zygote.send(WorkerReady(os.getpid(), version))
    zygote.serve()


if __name__ == "__main__":
    main()
