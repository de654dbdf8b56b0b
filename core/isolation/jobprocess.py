"""The disposable job process, forked from the warm worker: it runs the user's model.

It gets its own process group, dies with the worker, is the OOM killer's first
choice, sends its stdout/stderr to a pipe the worker drains, and leaves a
faulthandler stack dump behind on a crash, on ``os._exit`` and on the signal the
worker sends before killing it for a timeout or the memory cap.

A job process forked before its request arrives, and warm by then, is ``standby``'s;
the tiny export that warms the worker and the standbys is ``warmup``'s.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import signal
import sys
import traceback
from typing import Callable, NoReturn

from exportlens.core.isolation import capabilities
from exportlens.core.isolation.capabilities import proc_text
from exportlens.core.isolation.messages import (
    FakeCache,
    FromJob,
    Imported,
    JobResult,
    TargetBegins,
    TargetsFound,
    Taught,
    write_frame,
)
from exportlens.core.isolation.reaper import kill_descendants
from exportlens.core.isolation.speedups import fakecache, hotpages
from exportlens.core.isolation.speedups.preload import user_blas_threads
from exportlens.core.model.request import ExportRequest
from exportlens.core.trace import mark

# faulthandler dumps the stack on it before a kill; none on Windows (``capabilities``)
DUMP_SIGNAL = signal.SIGUSR1 if capabilities.DUMP_SIGNAL else None
# Without it, the job dumps its own stack this long before its time is up (``_dump_before_timeout``).
DUMP_AHEAD_S = 0.3
PR_SET_PDEATHSIG = 1
MAX_IMPORTED = 5000  # library modules one job reports to its worker
BAD_FORK_STAND_IN = "EXPORTLENS_STAND_IN_CUDA_BAD_FORK"


def child_main(
    request: ExportRequest,
    events_fd: int,
    output_fd: int,
    dump_fd: int,
    num_threads: int,
    learning: hotpages.Learning | None = None,
    forked: bool = True,
) -> None:
    """The disposable job process, forked or spawned (``spawning``). Never returns."""
    code = 0
    exit_now = os._exit  # ours, before the model's code can replace it
    mark(f"job: request {request.id} starts")
    before = set(sys.modules)
    try:
        if capabilities.PROCESS_GROUPS:  # Windows: its tree is ended by taskkill (``procs``)
            os.setpgid(0, 0)  # its own group, so a kill also takes any grandchildren
        try:  # be the OOM killer's first choice (``die_with`` made it die with the zygote)
            with proc_text("self/oom_score_adj", "w") as f:
                f.write("1000")
        except OSError:
            pass
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        faulthandler.enable(file=dump_fd, all_threads=True)
        if DUMP_SIGNAL is not None:
            faulthandler.register(DUMP_SIGNAL, file=dump_fd, all_threads=True)
        _dump_before_exit(dump_fd)
        import torch

        torch.set_num_threads(num_threads)
        if forked and os.environ.get(BAD_FORK_STAND_IN) == "1":
            # The tests' stand-in for a CUDA build whose warm-up touched CUDA in the
            # worker: torch's own fork check says yes, and torch raises its own error.
            torch.cuda._is_in_bad_fork = lambda: True
        user_blas_threads()
        fakecache.record()

        from exportlens.core.export.job import run_job
        from exportlens.core.export.verify import run_trials

        def write(message: FromJob) -> None:
            write_frame(events_fd, message)

        # Where there is no signal to ask for its stack with, the job leaves it itself.
        emit = write if DUMP_SIGNAL is not None else _dump_before_timeout(write, dump_fd, request.limits.timeout_s)

        # A request with trials verifies fixes (``core/fixes/verified``) instead of exporting.
        result = run_trials(request, emit) if request.trials else run_job(request, emit)
        mark("job: result built")
        # Flushed before the result, not after: the output in the pipe when the result
        # arrives is the result's; what comes after is nobody's.
        _flush()
        if DUMP_SIGNAL is None:
            faulthandler.cancel_dump_traceback_later()
        emit(JobResult(result))
        mark("job: result written")
        _lessons(request, before, learning, write)
    except BaseException:  # run_job handles the user's errors; this is our own bug
        traceback.print_exc()
        code = 70
    finally:
        _flush()
        if not capabilities.PRCTL:  # no subreaper: once this job is gone, nothing finds what it started
            kill_descendants(os.getpid())
        exit_now(code)


def _dump_before_timeout(emit: Callable[[FromJob], None], dump_fd: int, timeout_s: float) -> Callable[[FromJob], None]:
    """Where the worker has no signal to ask a job for its stack before killing it for
    its timeout (Windows; ``capabilities.DUMP_SIGNAL``), the job writes it itself, from
    faulthandler's watchdog thread, ``DUMP_AHEAD_S`` before the worker's clock runs out:
    armed now and again at each event that restarts that clock (``supervise``), each
    time over a dump nobody needed (the target before finished in time). Without
    ``/proc`` that clock is the wall clock, as the watchdog's is. A job killed for its
    memory (psutil's, read everywhere) has no stack there: its diagnostic points at its
    target. The ``emit`` to use instead."""

    def arm() -> None:
        os.ftruncate(dump_fd, 0)
        os.lseek(dump_fd, 0, os.SEEK_SET)
        faulthandler.dump_traceback_later(max(timeout_s - DUMP_AHEAD_S, 0.05), file=dump_fd)

    def emit_and_arm(message: FromJob) -> None:
        emit(message)
        if isinstance(message, (TargetsFound, TargetBegins)):
            arm()

    arm()  # the clock started with the job (a spawned one: once it said it is warm)
    return emit_and_arm


def _lessons(request: ExportRequest, before: set[str], learning: hotpages.Learning | None, write: Callable[[FromJob], None]) -> None:
    """What only speeds the worker's later jobs, sent after the result, in this
    order: the pages it copied (to the zygote's memfd, ``hotpages.teach``), the library modules
    it imported (``Imported``), the fake-tensor calls it made (``FakeCache``, when
    there are any), then ``Taught``. The worker sends the result on at once (unless
    the job left a process behind) and reads these while the editor shows it
    (``Zygote.finish_ending``), so they are off the save's path
    (docs/decisions/0007-result-before-lessons.md)."""
    if learning is not None:
        hotpages.teach(learning)
    try:
        write(_imported(before, request))
        asked = fakecache.questions()
        if asked:
            write(FakeCache(asked))
            mark("job: fake-tensor cache questions sent")
        write(Taught())
    except OSError:  # the worker stopped waiting for them (``LESSONS_S``): they only cost speed
        return
    mark("job: lessons written")


def _imported(before: set[str], request: ExportRequest) -> Imported:
    """What the worker may preload for later jobs: the library modules this job
    imported; and the preloaded libraries the model's code imported."""
    from exportlens.core.export import libraries
    from exportlens.core.export.loader import module_name_for

    modules = libraries.new_library_modules(before, request.root or module_name_for(request.path)[1])[:MAX_IMPORTED]
    return Imported(tuple(n for n, _ in modules), tuple(f for _, f in modules), tuple(libraries.preloaded_used()))


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - the model may have replaced or closed them
            pass


def die_with(parent: int) -> None:
    """Be killed when ``parent`` (the zygote) dies; called first thing after the fork.

    The death signal is armed only from here on: a parent that died since the fork
    (its children then belong to a subreaper or init) is caught by the ``getppid``
    check instead. It is not inherited by the job's own children (see ``reaper``).
    Where there is no prctl (``capabilities``), only that check is made.
    """
    if capabilities.PRCTL:
        try:
            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            return
    if os.getppid() != parent:
        os._exit(0)


def _dump_before_exit(dump_fd: int) -> None:
    """Make ``os._exit`` in model code leave its stack behind, to point at its line."""
    real_exit = os._exit

    def _exit(status: int) -> NoReturn:
        faulthandler.dump_traceback(file=dump_fd, all_threads=False)
        real_exit(status)

    os._exit = _exit
