"""One worker process as the pool sees it: started, talked to, stopped.

The pool (``exportlens.core.isolation.pool``) decides what each worker does; this
module owns the process: how it is started (``python -P -m
exportlens.core.isolation.zygote``, WorkerError when it cannot even be run), its
state, the request it holds, and how it is stopped -- asked first, then SIGTERM, so
that it still ends its job and whatever that started; SIGKILL only as a last resort.
Torch-free, like the pool.
"""

from __future__ import annotations

import enum
import logging
import os
import subprocess
import sys
import time
from typing import IO

from exportlens.core.isolation.messages import Exit, FrameDecoder, Preloading, ToWorker, write_frame
from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import Diagnostic, FileResult

log = logging.getLogger(__name__)

# How long a worker may take to exit once asked (it only kills its job and what that
# started: milliseconds, unless the machine is swamped), then after a SIGTERM.
CLOSE_GRACE_S = 10.0
TERM_GRACE_S = 2.0


class WorkerError(RuntimeError):
    """Workers cannot be started (torch broken, interpreter missing...)."""


class WorkerState(enum.Enum):
    """A worker process's life: it imports torch and warms up (STARTING), waits for a
    request (IDLE), runs one (BUSY); DEAD once the pool gave up on replacing it."""

    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"
    DEAD = "dead"


class WorkerProcess:
    """One worker process and the request it holds."""

    def __init__(self, log_file: IO[bytes] | int, record: str | None = None, start_method: str = "fork") -> None:
        """Start the process (``record``: its preload record; ``start_method``: how it
        starts its jobs, ``startmethod``); WorkerError when it cannot even be started."""
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable, "-P", "-m", "exportlens.core.isolation.zygote",
                    *(["--preload-record", record] if record else []),
                    "--start-method", start_method,
                ],  # fmt: skip
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log_file,
                close_fds=True,
            )
        except OSError as e:  # not executable, gone, no process left to fork...
            raise WorkerError(f"{sys.executable} cannot be run ({e.strerror or e})") from e
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.out = self.proc.stdout.fileno()
        self.inp = self.proc.stdin.fileno()
        os.set_blocking(self.out, False)
        self.decoder = FrameDecoder()
        self.state = WorkerState.STARTING
        self.request: ExportRequest | None = None
        self.job_pid: int | None = None  # the job process running ``request``
        self.preloading: Preloading | None = None  # the library module it said it imports now
        self.retiring: str | None = None  # why it said it exits (to be replaced, not a failure)
        self.last_heard = time.monotonic()
        self.started = self.last_heard

    def set_state(self, state: WorkerState, why: str = "") -> None:
        """The one place a worker's state changes, and the one log line it makes."""
        if state is not self.state:
            log.debug("worker %d: %s -> %s%s", self.proc.pid, self.state.value, state.value, f" ({why})" if why else "")
            self.state = state

    def send(self, message: ToWorker) -> None:
        write_frame(self.inp, message)

    def ask_to_exit(self) -> None:
        """Send ``Exit``: the worker ends its job and whatever that started, then exits."""
        try:
            self.send(Exit())
        except OSError:
            pass

    def kill(self, grace_s: float = 0.0) -> None:
        """Stop the worker: wait ``grace_s`` for it to exit (after ``ask_to_exit``),
        then SIGTERM, which it takes as ``Exit``; SIGKILL only for one that ignores
        both -- a killed worker cannot kill what its job started (see ``reaper``)."""
        for stop, wait_s in ((None, grace_s), (self.proc.terminate, TERM_GRACE_S)):
            if self.proc.poll() is not None:
                break
            try:
                if stop is not None:
                    stop()
                if wait_s:
                    self.proc.wait(timeout=wait_s)
            except (OSError, subprocess.TimeoutExpired):
                pass
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


def crash_result(request: ExportRequest, why: str) -> FileResult:
    message = f"the exportlens worker process failed ({why}); the file was not checked"
    return FileResult(path=request.path, diagnostics=(Diagnostic("worker-crash", message, 1),))
