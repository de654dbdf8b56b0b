"""Forking job processes from the zygote: one fresh fork per request.

``Forker`` is the ``starters.JobStarter`` of the ``fork`` start method, with no
standby of its own: the standby speed-up (``speedups/standby.ForkStandby``) wraps it
where it is on. A forked child keeps the descriptors it is given (its three pipes and
what its caller names) and closes every other pipe, memfd and epoll of the worker's
(``close_all_but``): a model must never write into the frame stream, nor keep a pipe
of the worker's open. What a library the worker imported holds open stays open.

Each job process gets three pipes back to the worker: its events (frames), its
stdout/stderr, and a memfd for faulthandler's stack dump. ``end_job`` closes all
of it and returns the dump.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import tempfile
from dataclasses import dataclass
from typing import Callable

from exportlens.core.isolation import capabilities
from exportlens.core.isolation.jobprocess import child_main, die_with
from exportlens.core.isolation.pipes import Tail, drain
from exportlens.core.isolation.procs import exit_code, kill_group
from exportlens.core.model.request import ExportRequest
from exportlens.core.trace import mark

DUMP_READ_MAX = 1 << 20  # bytes of a stack dump read back: enough for every thread
MAX_FD = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1 << 16  # above every descriptor the worker can hold


@dataclass
class Job:
    """A forked job process and the worker's ends of its pipes."""

    pid: int
    events_r: int
    output_r: int
    dump_fd: int
    spawned: bool = False  # started without fork (``spawning``): it imports torch before its limits apply


@dataclass
class Standby:
    job: Job
    request_w: int  # the request goes here; closing it without one makes it exit


class Forker:
    """Forks job processes for one zygote: the ``starters.JobStarter`` of the
    ``fork`` start method, holding no standby (``start_standby`` does nothing)."""

    def __init__(self, num_threads: int = 1) -> None:
        self.num_threads = num_threads
        # Jobs killed but not reaped yet: reaping waits for the kernel to tear down a
        # process's memory, milliseconds a request need not wait for. ``reap_dead``
        # or ``kill_strays`` reap them later.
        self.dying: set[int] = set()

    def start_job(self, request: ExportRequest) -> Job:
        """Fork a job process for the request."""
        mark(f"zygote: fresh fork for request {request.id}")
        return self.fork(lambda events_w, output_w, dump_fd: child_main(request, events_w, output_w, dump_fd, self.num_threads))

    def start_standby(self, busy: Job | None = None) -> None:
        """No standby here (``speedups/standby.ForkStandby`` holds one)."""

    def take_standby(self, request: ExportRequest) -> Job | None:
        return None

    def drop_standby(self) -> None:
        pass

    def kept_pids(self) -> tuple[int, ...]:
        return ()

    def learn_from(self, pid: int) -> None:
        pass

    def reap_dead(self) -> None:
        """Reap the killed processes that are gone by now; the others stay in ``dying``."""
        for pid in list(self.dying):  # forked or spawned (``procs.exit_code`` waits on either)
            try:
                done = exit_code(pid) is not None
            except ChildProcessError:
                done = True
            if done:
                self.dying.discard(pid)

    def fork(self, child: Callable[[int, int, int], None], keep: tuple[int, ...] = ()) -> Job:
        """Fork a job process running ``child(events_w, output_w, dump_fd)``. Of the
        worker's own descriptors it keeps stdin, stdout, stderr, those three and
        ``keep``, and closes every other pipe, memfd and epoll (``close_all_but``)."""
        events_r, events_w = os.pipe()
        output_r, output_w = os.pipe()
        dump_fd = dump_file()
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            die_with(parent)
            # The worker's SIGTERM handler and signal wake-up pipe are not the job's.
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            close_all_but((events_w, output_w, dump_fd, *keep))
            child(events_w, output_w, dump_fd)
        os.close(events_w)
        os.close(output_w)
        try:
            os.setpgid(pid, pid)  # also done in the child; whichever runs first wins
        except OSError:
            pass
        os.set_blocking(events_r, False)
        os.set_blocking(output_r, False)
        return Job(pid, events_r, output_r, dump_fd)


def close_all_but(keep: tuple[int, ...]) -> None:
    """Close the worker's descriptors above stderr except ``keep``: in a forked child,
    every pipe, memfd (or unlinked temporary file) and anonymous inode (the waiter's
    epoll) -- the kinds the worker makes, its own and its spawned jobs'. A file,
    socket or device a library the worker imported holds (a log, a database,
    ``/dev/urandom``) stays open, as in the worker: closed, its number would be the
    job's next ``open`` and the library's object would write into that file."""
    kept = {fd for fd in keep if fd >= 0}
    for fd in _open_fds():
        if fd < 3 or fd in kept:
            continue
        try:
            st = os.fstat(fd)
        except OSError:  # the listing's own descriptor, closed since
            continue
        kind = stat.S_IFMT(st.st_mode)
        if kind == stat.S_IFIFO or kind == 0 or (kind == stat.S_IFREG and st.st_nlink == 0):
            os.close(fd)


def _open_fds() -> list[int]:
    """The descriptors open here: listed by the kernel (Linux's /proc, macOS's /dev/fd),
    else every number below ``MAX_FD`` (which can be a million or more: listing spares
    a fork that many calls where ``os.closerange`` has no ``close_range``)."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return [int(name) for name in os.listdir(folder)]
        except (OSError, ValueError):
            pass
    return list(range(3, MAX_FD))


def dump_file() -> int:
    """Where a job's faulthandler writes its stack dump for the worker to read back:
    a memfd, or where there is none (macOS) an unlinked temporary file."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("exportlens-stack")
    with tempfile.TemporaryFile(prefix="exportlens-stack-") as f:
        return os.dup(f.fileno())


def end_job(job: Job, tail: Tail) -> str:
    """Kill the job's process group, keep the rest of its output, close its pipes;
    the stack dump it left behind (empty when it wrote none)."""
    kill_group(job.pid)
    return close_job(job, tail)


def close_job(job: Job, tail: Tail) -> str:
    """Keep the rest of a stopped job's output and close its pipes; its stack dump."""
    drain(job.output_r, tail.add)
    for fd in (job.events_r, job.output_r):
        os.close(fd)
    size = os.fstat(job.dump_fd).st_size
    dump = read_head(job.dump_fd, min(size, DUMP_READ_MAX)).decode("utf-8", "replace")
    os.close(job.dump_fd)
    return dump


def read_head(fd: int, size: int) -> bytes:
    """The first ``size`` bytes of the file ``fd``: by ``os.pread``, or where there is
    none (Windows, ``capabilities.PREAD``) by seeking to its start (the job that wrote
    at the offset they share is gone)."""
    if capabilities.PREAD:
        return os.pread(fd, size, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.read(fd, size)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)

