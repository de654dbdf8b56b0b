"""Forking job processes from the zygote: a fresh fork per request, or the standby.

While the worker is idle it forks the *next* job process ahead of its request and
lets it warm up (``standby_main``: writing the hot pages, ``hotpages``, else a tiny
export, pays the fork's copy-on-write of torch's op tables). Once the hot pages are
known, the next one is forked beside a running job, when it begins its first target.
A request then starts in that warm process; one that arrives while the standby is
still warming goes to a fresh fork instead (after waiting up to ``POPULATE_WAIT_S``
for one writing its hot pages), so warming never delays an export by much. Off with
``EXPORTLENS_STANDBY=0``.

Measured, and when to revisit it: docs/decisions/0002-standby-job.md (the standby),
docs/decisions/0003-hot-pages.md (its pages and the jobs' lessons).

Each job process gets three pipes back to the worker: its events (frames), its
stdout/stderr, and a memfd for faulthandler's stack dump. ``end_job`` closes all
of it and returns the dump.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from dataclasses import dataclass
from typing import Callable

from exportlens.core.isolation import capabilities, hotpages
from exportlens.core.isolation.jobprocess import child_main, die_with
from exportlens.core.isolation.messages import Export, StandbyWarm, encode, write_frame
from exportlens.core.isolation.pipes import Tail, drain
from exportlens.core.isolation.procs import exit_code, kill_group, signal_group
from exportlens.core.isolation.standby import standby_main
from exportlens.core.isolation.waiting import read_within
from exportlens.core.model.request import ExportRequest
from exportlens.core.trace import mark

LESSON_PAUSE = 16  # saves of a file whose job had little to tell before it is asked again

STANDBY = os.environ.get("EXPORTLENS_STANDBY", "1") != "0"
# Off with EXPORTLENS_HOT_PAGES=0: standbys then always warm up with a tiny export.
# They need a memfd to hand the pages over (Linux): elsewhere they are off too.
HOT_PAGES = os.environ.get("EXPORTLENS_HOT_PAGES", "1") != "0" and hasattr(os, "memfd_create")
# How long a request waits for a standby still writing its hot pages before it takes
# a fresh fork instead, which pays the same pages as faults (docs/decisions/0002-standby-job.md).
POPULATE_WAIT_S = 0.05
DUMP_READ_MAX = 1 << 20  # bytes of a stack dump read back: enough for every thread


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
    """Forks job processes for one zygote and holds its standby, if any.

    ``private_fds`` (the worker's protocol pipes) are closed in every child: a
    model must never write into the frame stream, nor keep it open.
    """

    def __init__(self, num_threads: int = 1, private_fds: tuple[int, ...] = ()) -> None:
        self.num_threads = num_threads
        self.private_fds = private_fds
        self.standby: Standby | None = None
        # Standbys and finished jobs killed but not reaped yet: reaping waits for
        # the kernel to tear down a process's memory, milliseconds a request need
        # not wait for. ``reap_dead`` or ``kill_strays`` reap them later.
        self.dying: set[int] = set()
        # The pages an export writes (``hotpages``): recorded by a standby into
        # ``record_fd``, read back here once; None until then, [] when unknown.
        self.hot: hotpages.Runs | None = None
        self.record_fd = -1
        # Process -> the memfd its job tells the pages it copied in (a standby that
        # warmed by hot pages: ``hotpages``), and lessons read back, added to ``hot``
        # when the next standby is forked.
        self.learning: dict[int, int] = {}
        self.lessons: list[bytes] = []
        # Which file each learning job runs, and how many pages the last job of a
        # file told of: a file whose job had little to tell is not asked again for
        # ``LESSON_PAUSE`` saves, as the read would cost its job time for nothing.
        self.teaching: dict[int, str] = {}
        self.taught: dict[str, int] = {}  # path -> pages its last job told of, or saves not asked since (negative)

    def fork_job(self, request: ExportRequest) -> Job:
        mark(f"zygote: fresh fork for request {request.id}")
        return self._fork(lambda events_w, output_w, dump_fd: child_main(request, events_w, output_w, dump_fd, self.num_threads))

    def spawn_standby(self, busy: Job | None = None) -> None:
        """Fork the next job process now (see ``standby_main``): while nothing is
        waiting, or beside the ``busy`` job once standbys warm by hot pages."""
        if self.standby is not None or not STANDBY:
            return
        self._read_hot()
        if busy is not None and not self.hot:
            return  # a tiny export beside the job would take the CPU the job needs
        if self.hot is None and self.record_fd < 0 and HOT_PAGES:
            self.record_fd = os.memfd_create("exportlens-hot-pages")
        request_r, request_w = os.pipe()
        hot, record_fd = self.hot, self.record_fd
        learn_fd = os.memfd_create("exportlens-copied-pages") if hot and capabilities.RESOURCE else -1
        theirs = (busy.events_r, busy.output_r, busy.dump_fd) if busy else ()

        def child(events_w: int, output_w: int, dump_fd: int) -> None:
            os.close(request_w)
            for fd in theirs:  # the running job's pipes are not the standby's
                os.close(fd)
            standby_main(request_r, events_w, output_w, dump_fd, self.num_threads, hot, record_fd, learn_fd)

        job = self._fork(child, keep=record_fd)
        os.close(request_r)
        if learn_fd >= 0:
            self.learning[job.pid] = learn_fd
        self.standby = Standby(job, request_w)
        mark(f"zygote: standby {job.pid} forked")

    def take_standby(self, request: ExportRequest) -> Job | None:
        """Hand the request to the standby job process, if one is alive and warm to take it."""
        standby, self.standby = self.standby, None
        if standby is None:
            return None
        try:
            done, _ = os.waitpid(standby.job.pid, os.WNOHANG)
            # Warming by writing the hot pages takes a few tens of ms: finishing that
            # is cheaper than a fresh fork, which pays them as faults in the export.
            wait_s = POPULATE_WAIT_S if self.hot else 0.0
            if not done and _ready(standby.job.events_r, wait_s):
                learn = standby.job.pid in self.learning and self._worth_a_lesson(request.path)
                if learn:
                    self.teaching[standby.job.pid] = request.path
                write_frame(standby.request_w, Export(request, learn=learn))
                os.close(standby.request_w)
                mark(f"zygote: standby {standby.job.pid} takes request {request.id}")
                return standby.job
        except OSError:
            pass
        mark(f"zygote: standby {standby.job.pid} not warm, killed for request {request.id}")
        self._kill_standby(standby, reap=False)
        return None

    def _worth_a_lesson(self, path: str) -> bool:
        """Whether the job of ``path`` should tell the pages it copied: yes unless the
        file's last job told of fewer than ``hotpages.LEARN_FAULTS`` (its pages are
        known, or what it faults on is fresh memory no list can spare); such a file is
        asked again after ``LESSON_PAUSE`` saves, in case its model grew."""
        last = self.taught.get(path)
        if last is None or last >= hotpages.LEARN_FAULTS:
            return True
        self.taught[path] = -LESSON_PAUSE if last >= 0 else last + 1
        return self.taught[path] == 0

    def learn_from(self, pid: int) -> None:
        """A job process is over: keep what it told of the pages it copied, if anything."""
        fd = self.learning.pop(pid, None)
        path = self.teaching.pop(pid, None)
        if fd is None:
            return
        try:
            data = os.pread(fd, hotpages.MAX_PAGES * 16, 0)
            if data:
                self.lessons.append(data)
            if path is not None:
                self.taught[path] = hotpages.pages_in(data)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _read_hot(self) -> None:
        """Take the pages a standby recorded, once it has, and those jobs told of
        since (see ``hotpages``)."""
        if self.hot and self.lessons:
            mappings = hotpages.writable_mappings()
            for data in self.lessons:
                self.hot = hotpages.merge(self.hot, hotpages.from_bytes(data, mappings))
            self.lessons.clear()
            mark(f"zygote: {sum(size for _, size in self.hot) // hotpages.PAGE} hot pages in {len(self.hot)} runs, with what jobs copied")
        if self.hot is not None or self.record_fd < 0:
            return
        size = os.fstat(self.record_fd).st_size
        if not size:
            return
        data = os.pread(self.record_fd, min(size, hotpages.MAX_PAGES * 16), 0)
        self.hot = hotpages.from_bytes(data, hotpages.writable_mappings())
        os.close(self.record_fd)
        self.record_fd = -1
        mark(f"zygote: {sum(size for _, size in self.hot) // hotpages.PAGE} hot pages in {len(self.hot)} runs")

    def reap_dead(self) -> None:
        """Reap the killed processes that are gone by now; the others stay in ``dying``."""
        for pid in list(self.dying):  # forked or spawned (``procs.exit_code`` waits on either)
            try:
                done = exit_code(pid) is not None
            except ChildProcessError:
                done = True
            if done:
                self.dying.discard(pid)

    def kept_pids(self) -> tuple[int, ...]:
        """The job processes forked and not yet handed a request (the standby)."""
        return (self.standby.job.pid,) if self.standby else ()

    def drop_standby(self) -> None:
        standby, self.standby = self.standby, None
        if standby is not None:
            self._kill_standby(standby)
            mark(f"zygote: standby {standby.job.pid} dropped")

    def _kill_standby(self, standby: Standby, reap: bool = True) -> None:
        self.learn_from(standby.job.pid)  # nothing to learn: it ran no request
        if reap:
            kill_group(standby.job.pid)
        else:
            signal_group(standby.job.pid)
            self.dying.add(standby.job.pid)
        for fd in (standby.request_w, standby.job.events_r, standby.job.output_r, standby.job.dump_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def _fork(self, child: Callable[[int, int, int], None], keep: int = -1) -> Job:
        """Fork a job process running ``child(events_w, output_w, dump_fd)``; of
        the worker's own fds, only ``keep`` stays open in it."""
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
            standby_w = self.standby.request_w if self.standby else -1
            record_fd = self.record_fd if self.record_fd != keep else -1
            for fd in (events_r, output_r, standby_w, record_fd, *self.learning.values(), *self.private_fds):
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
        return Job(pid, events_r, output_r, dump_fd)


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


def _ready(events_r: int, wait_s: float = 0.0) -> bool:
    """Whether the standby said it is warm (its first and only frame before a
    request), waiting up to ``wait_s`` for it to."""
    return read_within(events_r, wait_s) == encode(StandbyWarm())
