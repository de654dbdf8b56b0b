"""Watching one job process to its end: its events, its output, its clock, its memory.

The zygote hands a forked job here and gets back an ``Attempt``: what the job said
(the targets it found, the one in progress, those it finished, its result) and, when
it did not finish, why it was stopped: ``timeout``, ``out-of-memory`` or
``worker-crash``. The worker's own input stays read meanwhile, so a ``Cancel`` or an
``Exit`` from the pool ends the job at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

from exportlens.core.isolation.failure import exit_text
from exportlens.core.isolation.forking import Job
from exportlens.core.isolation.jobclock import WARM_UP_S, JobClock
from exportlens.core.isolation.messages import (
    FakeCache,
    FrameDecoder,
    FromJob,
    FromWorker,
    Imported,
    JobResult,
    LoweringState,
    Message,
    MessageError,
    Phase,
    Progress,
    StandbyWarm,
    TargetBegins,
    TargetDone,
    TargetExported,
    TargetsFound,
    Taught,
    ToWorker,
)
from exportlens.core.isolation.pipes import Tail
from exportlens.core.isolation.procs import dump_stack, exit_code, rss_kb
from exportlens.core.isolation.waiting import Waiter
from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import Diagnostic, FileResult, TargetDecl, TargetResult

MEMORY_POLL_S = 0.025
# The most the worker waits, once it sent a job's result on, for the lessons the job
# writes after it (``jobprocess._lessons``; docs/decisions/0007-result-before-lessons.md);
# lessons lost only cost speed.
LESSONS_S = 1.0


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
    # Targets exported and being lowered: their final export result (``TargetExported``),
    # and how far their lowering came (``LoweringState``): a death while lowering keeps both.
    exported: dict[str, tuple[TargetResult, list[Diagnostic]]] = field(default_factory=dict)
    lowering: dict[str, LoweringState] = field(default_factory=dict)
    imported: Imported | None = None  # the library modules it imported (``preload``)
    fake_cache: bytes = b""  # the fake-tensor cache entries it added (``fakecache``)
    # Its event stream, read so far: the lessons that follow its result are read on
    # from here (``Zygote.finish_ending``), a frame split across reads included.
    frames: FrameDecoder = field(default_factory=FrameDecoder)
    taught: bool = False  # it said its lessons are all written (``Taught``)


class Control(Protocol):
    """What supervision needs of the worker: the pipes it waits on (``waiting``: its
    protocol input as "in", perhaps its signal wake-up pipe as "wake"), reading that
    input, and whether to stop."""

    inputs: Waiter

    def read_input(self) -> None: ...

    def read_wake(self) -> None: ...

    def send(self, message: FromWorker) -> None: ...

    @property
    def stop_requested(self) -> bool: ...


def supervise(
    control: Control,
    job: Job,
    request: ExportRequest,
    attempt: Attempt,
    tail: Tail,
    exporting: Callable[[], None] | None = None,
) -> None:
    """Follow the job until it sent its result, died, ran out of time or memory, or
    the worker was told to stop it; ``attempt`` says which. The caller kills it.
    ``exporting`` is called once, when the job begins its first target (its file ran)."""
    pid, events_r, output_r = job.pid, job.events_r, job.output_r
    limits = request.limits
    memory_kb = limits.memory_mb * 1024
    clock = JobClock(pid, WARM_UP_S if job.spawned else limits.timeout_s, time.monotonic())
    next_poll = 0.0
    events = attempt.frames
    inputs = control.inputs
    inputs.add(events_r, "events")
    inputs.add(output_r, "output")
    try:
        while True:
            for key in inputs.wait(MEMORY_POLL_S):
                if key == "in":
                    control.read_input()
                elif key == "wake":
                    control.read_wake()  # a signal: SIGTERM made ``stop_requested`` true
                elif key == "output":
                    # Bounded, so a model printing nonstop cannot starve the checks.
                    if not inputs.read(output_r, tail.add, max_chunks=16):
                        inputs.remove(output_r)
                elif key == "events":
                    try:
                        messages, open_ = _read_events(inputs, events_r, events)
                        for message in messages:
                            if on_event(message, request, attempt, control.send):
                                clock.limit_s = limits.timeout_s
                                clock.restart(time.monotonic())
                            if exporting is not None and isinstance(message, TargetBegins):
                                exporting()
                                exporting = None
                    except MessageError as e:
                        attempt.failure, attempt.detail = "worker-crash", f"after writing garbage to its event pipe ({e})"
                        return
                    if not open_:
                        inputs.remove(events_r)
            if attempt.result is not None:
                return
            if control.stop_requested:
                attempt.cancelled = True
                return
            code = exit_code(pid)
            if code is not None:
                try:
                    inputs.read(events_r, lambda c: [on_event(m, request, attempt, control.send) for m in events.feed(c)])
                except MessageError:
                    pass  # it is gone; what it managed to say stands
                if attempt.result is None:
                    attempt.failure = "worker-crash"
                    attempt.detail = exit_text(code)
                return
            now = time.monotonic()
            # The job's own time: waiting for a CPU on a loaded machine is not the
            # export's (``jobclock``), so a hoarding job reaches its memory cap first
            # however busy the machine.
            out_of_time = clock.out_of_time(now)
            # Memory first, and always once time is up: a job that hoards memory runs
            # slowly (page faults), so it may pass both limits between two looks; it
            # is the memory that stopped it.
            if out_of_time or now >= next_poll:
                next_poll = now + MEMORY_POLL_S
                if rss_kb(pid) > memory_kb:
                    attempt.failure = "out-of-memory"
                    dump_stack(pid)
                    return
            if out_of_time:
                attempt.failure = "timeout"
                dump_stack(pid)
                return
    finally:
        inputs.remove(events_r)
        for chunk in inputs.remove(output_r):  # read by a poll, not yet taken
            tail.add(chunk)


def _read_events(inputs: Waiter, events_r: int, frames: FrameDecoder) -> tuple[list[Message], bool]:
    """The messages the job wrote since the last read (raises MessageError on garbage),
    and whether its event pipe is still open."""
    chunks: list[bytes] = []
    open_ = inputs.read(events_r, chunks.append)
    return frames.feed(b"".join(chunks)), open_


def read_lessons(control: Control, job: Job, request: ExportRequest, attempt: Attempt, bound_s: float = LESSONS_S) -> None:
    """Read on what the job writes after its result (``jobprocess._lessons``: the
    modules it imported, the fake-tensor calls it made) into ``attempt``, until it
    says it is done (``Taught``), its event pipe closes, or ``bound_s`` is spent.
    The protocol input is read meanwhile (a request that comes is queued); a stop
    ends the wait."""
    inputs = control.inputs
    inputs.add(job.events_r, "events")
    until = time.monotonic() + bound_s
    try:
        while not control.stop_requested and not attempt.taught:
            left = until - time.monotonic()
            if left <= 0:
                return
            for key in inputs.wait(left):
                if key == "in":
                    control.read_input()
                elif key == "wake":
                    control.read_wake()
                elif key == "events":
                    try:
                        messages, open_ = _read_events(inputs, job.events_r, attempt.frames)
                        for message in messages:
                            on_event(message, request, attempt, lambda _: None)
                    except MessageError:
                        return  # garbage after its result: the lessons are lost, nothing else
                    if not open_:
                        return
    finally:
        inputs.remove(job.events_r)


def on_event(
    message: FromJob | ToWorker | FromWorker,
    request: ExportRequest,
    attempt: Attempt,
    send: Callable[[FromWorker], None],
) -> bool:
    """Record one job event (``send`` tells the pool of progress); True when it
    starts a new timeout period."""
    if isinstance(message, TargetsFound):
        attempt.decls = list(message.targets)
        return True
    if isinstance(message, StandbyWarm):  # a spawned job finished importing torch: its time starts now
        return True
    if isinstance(message, TargetBegins):
        attempt.current = message.target
        names = [d.name for d in attempt.decls or ()]
        index = names.index(message.target) + 1 if message.target in names else None
        # index/total let the front end show "exporting Counter (1/2)".
        send(Progress(request.id, message.target, index, len(names) or None))
        return True
    if isinstance(message, Phase):
        names = [d.name for d in attempt.decls or ()]
        target = message.target or ""
        index = names.index(target) + 1 if target in names else None
        send(Progress(request.id, target, index, len(names) or None, message.phase))
        return False
    if isinstance(message, TargetDone):
        attempt.done.append((message.target, list(message.diagnostics)))
        attempt.exported.pop(message.target.name, None)
        attempt.lowering.pop(message.target.name, None)
    elif isinstance(message, TargetExported):
        attempt.exported[message.target.name] = (message.target, list(message.diagnostics))
    elif isinstance(message, LoweringState):
        attempt.lowering[message.target] = message
    elif isinstance(message, Imported):
        attempt.imported = message
    elif isinstance(message, FakeCache):
        attempt.fake_cache = message.data
    elif isinstance(message, JobResult):
        attempt.result = message.result
    elif isinstance(message, Taught):
        attempt.taught = True
    return False
