"""The standby speed-up: the next job process forked before its request arrives.

While the worker is idle, ``ForkStandby`` forks the *next* job process ahead of its
request and lets it warm up (``standby_main``: writing the hot pages, ``hotpages``,
else a tiny export, pays the fork's copy-on-write of torch's op tables). Once the hot
pages are known, the next one is forked beside a running job, when it begins its first
target. A request then starts in that warm process; one that arrives while the standby
is still warming goes to a fresh fork instead (after waiting up to ``POPULATE_WAIT_S``
for one writing its hot pages), so warming never delays an export by much.

It wraps the core's ``forking.Forker`` (the ``starters.JobStarter`` of the fork start
method) and answers the same calls. Off with ``EXPORTLENS_STANDBY=0`` (``switches``):
the zygote then forks each job when its request comes.

Measured, and when to switch it off: docs/decisions/0002-standby-job.md (the standby),
docs/decisions/0003-hot-pages.md (its pages and the jobs' lessons).
"""

from __future__ import annotations

import os
from typing import NoReturn

from exportlens.core.isolation.forking import Forker, Job, Standby
from exportlens.core.isolation.jobprocess import child_main
from exportlens.core.isolation.messages import Export, StandbyWarm, encode, read_frame, write_frame
from exportlens.core.isolation.procs import kill_group, signal_group
from exportlens.core.isolation.speedups import hotpages, switches
from exportlens.core.isolation.waiting import read_within
from exportlens.core.isolation.warmup import prewarm
from exportlens.core.model.request import ExportRequest
from exportlens.core.trace import mark

STATE = switches.decide("EXPORTLENS_STANDBY", gains="the next job process is forked and warmed before its request")
# How long a request waits for a standby still writing its hot pages before it takes
# a fresh fork instead, which pays the same pages as faults (docs/decisions/0002-standby-job.md).
POPULATE_WAIT_S = 0.05


class ForkStandby:
    """The fork start method's job starter with a standby: ``forker`` forks, this
    holds the standby and, where hot pages are on, what they learn (``pages``)."""

    def __init__(self, forker: Forker) -> None:
        self.forker = forker
        self.dying = forker.dying
        self.standby: Standby | None = None
        self.pages = hotpages.Learned() if hotpages.STATE.on else None

    def start_job(self, request: ExportRequest) -> Job:
        return self.forker.start_job(request)

    def reap_dead(self) -> None:
        self.forker.reap_dead()

    def start_standby(self, busy: Job | None = None) -> None:
        """Fork the next job process now (see ``standby_main``): while nothing is
        waiting, or beside the ``busy`` job once standbys warm by hot pages."""
        if self.standby is not None:
            return
        pages = self.pages
        hot = pages.read() if pages is not None else None
        if busy is not None and not hot:
            return  # a tiny export beside the job would take the CPU the job needs
        record_fd = pages.record_fd_for_standby() if pages is not None else -1
        learn_fd = pages.learn_fd() if pages is not None and hot else -1
        request_r, request_w = os.pipe()
        num_threads = self.forker.num_threads

        def child(events_w: int, output_w: int, dump_fd: int) -> None:
            standby_main(request_r, events_w, output_w, dump_fd, num_threads, hot, record_fd, learn_fd)

        job = self.forker.fork(child, keep=(request_r, record_fd, learn_fd))
        os.close(request_r)
        if pages is not None:
            pages.forked(job.pid, learn_fd)
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
            wait_s = POPULATE_WAIT_S if self.pages is not None and self.pages.hot else 0.0
            if not done and read_within(standby.job.events_r, wait_s) == encode(StandbyWarm()):
                learn = self.pages is not None and self.pages.ask(standby.job.pid, request.path)
                write_frame(standby.request_w, Export(request, learn=learn))
                os.close(standby.request_w)
                mark(f"zygote: standby {standby.job.pid} takes request {request.id}")
                return standby.job
        except OSError:
            pass
        mark(f"zygote: standby {standby.job.pid} not warm, killed for request {request.id}")
        self._kill(standby, reap=False)
        return None

    def learn_from(self, pid: int) -> None:
        """A job process is over: keep what it told of the pages it copied, if anything."""
        if self.pages is not None:
            self.pages.learn_from(pid)

    def kept_pids(self) -> tuple[int, ...]:
        """The job processes forked and not yet handed a request (the standby)."""
        return (self.standby.job.pid,) if self.standby else ()

    def drop_standby(self) -> None:
        standby, self.standby = self.standby, None
        if standby is not None:
            self._kill(standby)
            mark(f"zygote: standby {standby.job.pid} dropped")

    def _kill(self, standby: Standby, reap: bool = True) -> None:
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


def standby_main(
    request_fd: int,
    events_fd: int,
    output_fd: int,
    dump_fd: int,
    num_threads: int,
    hot: hotpages.Runs | None = None,
    record_fd: int = -1,
    learn_fd: int = -1,
) -> NoReturn:
    """A job process forked *before* its request arrives. Never returns.

    A fresh fork pays copy-on-write for every page it writes, and an export writes
    all over torch's operator tables (``run_decompositions`` walks every op). The
    standby pays that while the user is still typing, then blocks until the worker
    hands it a request (or closes the pipe: exit). A request that comes while it is
    still warming up goes to a fresh fork instead (or, when it writes hot pages, to
    it, once warm within ``POPULATE_WAIT_S``), so warming never delays an
    export by much.

    With ``hot`` (the pages an export writes, ``hotpages``) it writes those pages in
    one go, a fraction of the time of a tiny export; without, it runs the tiny export,
    and with ``record_fd`` records which pages that wrote, for the next standbys.
    With ``learn_fd``, warmed by hot pages, it reads its pages before it takes a
    request, for its job to tell which ones it copied (``hotpages``).
    """
    mark("standby: warming")
    how = "hot pages"
    if not (hot and hotpages.populate(hot)):
        how = "a tiny export"
        mappings = hotpages.writable_mappings() if record_fd >= 0 else []
        before = hotpages.snapshot(mappings) if mappings else None
        try:
            prewarm()
        except BaseException:  # noqa: BLE001 - a failed warm-up only costs speed
            pass
        after = hotpages.snapshot(mappings) if before is not None else None
        if before is not None and after is not None:
            try:
                os.pwrite(record_fd, hotpages.to_bytes(hotpages.written(mappings, before, after)), 0)
            except OSError:
                pass
    if record_fd >= 0:
        os.close(record_fd)
    learning = None
    if learn_fd >= 0:
        mappings = hotpages.writable_mappings() if how == "hot pages" else []
        before = hotpages.snapshot(mappings) if mappings else None
        if before is None:
            os.close(learn_fd)
        else:
            import resource  # a lesson is asked for only where there is ``resource`` (``hotpages.Learned.learn_fd``)

            learning = hotpages.Learning(mappings, before, learn_fd, resource.getrusage(resource.RUSAGE_SELF).ru_minflt, hotpages.anon_resident_pages())
    mark(f"standby: warm, by {how}")
    write_frame(events_fd, StandbyWarm())  # warm: the worker may hand it a request
    request: ExportRequest | None = None
    try:
        message = read_frame(request_fd)
        if isinstance(message, Export):
            request = message.request
            if learning is not None and not message.learn:  # the file's last job had little to tell
                os.close(learning.fd)
                learning = None
    except BaseException:  # noqa: BLE001 - garbage on our own pipe: exit quietly
        pass
    os.close(request_fd)
    if request is None:
        os._exit(0)
    child_main(request, events_fd, output_fd, dump_fd, num_threads, learning)
    os._exit(70)  # not reached: child_main exits
