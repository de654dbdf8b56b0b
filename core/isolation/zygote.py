"""The warm export worker: ``python -m exportlens.core.isolation.zygote``.

One worker is a *zygote*: a single-threaded process that imports torch once, runs a
tiny export so lazy imports and caches are hot, and then forks one disposable child
per request. The child runs ``exportlens.core.export.job.run_job`` (the user's model code);
a crash, hang, ``sys.exit``, print storm or memory blow-up ends only that child.
Forking a warm zygote is what makes a job start in a fraction of a fresh
interpreter's time (docs/decisions/0001-fork-from-a-warm-zygote.md). That is the ``fork``
start method; with ``spawn`` (``startmethod``: macOS, Windows, or chosen) the job
processes are fresh interpreters instead (``spawning``), and so are the jobs of a
file whose fork torch refused CUDA (``spawning.fork_refused``); the rest is the same.

This module is the worker's protocol with the pool and its main loop. The rest of
the worker is by subject: forking job processes and the warm standby
(``forking``), watching one job to its end (``supervise``), one request across as
many jobs as it takes (``attempts``), the words of a failure (``failure``), and the
libraries it imports while idle, so that jobs start with them (``preload``).

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
import signal
import sys
import time
from dataclasses import dataclass
from types import FrameType

from exportlens.core.isolation import capabilities
from exportlens.core.isolation.attempts import read_model, run_request
from exportlens.core.isolation.forking import Forker, Job, close_job, end_job
from exportlens.core.isolation.messages import (
    Cancel,
    Exit,
    Export,
    Finished,
    FrameDecoder,
    FromJob,
    FromWorker,
    JobStarted,
    MessageError,
    Retiring,
    ToWorker,
    WorkerReady,
    write_frame,
)
from exportlens.core.isolation.pipes import Tail, drain
from exportlens.core.isolation.procs import signal_group
from exportlens.core.isolation.reaper import become_subreaper, children, kill_strays
from exportlens.core.isolation.spawning import Spawner, fork_refused
from exportlens.core.isolation.speedups import fakecache, framestack, plugins
from exportlens.core.isolation.speedups.preload import Preloader, one_blas_thread
from exportlens.core.isolation.starters import JobStarter
from exportlens.core.isolation.supervise import Attempt, read_lessons, supervise
from exportlens.core.isolation.waiting import make_waiter
from exportlens.core.isolation.warmup import warm_up
from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import FileResult
from exportlens.core.trace import mark

REAP_POLL_S = 0.02  # how often an idle worker looks whether a killed process is gone
SIGNAL_POLL_S = 0.1  # without a wake-up pipe (``capabilities.WAKEUP_PIPE``): how often a waiting worker looks whether a signal came


@dataclass
class Ending:
    """A job whose result is out: its lessons are still to read, then it is killed."""

    request: ExportRequest
    job: Job
    tail: Tail
    attempt: Attempt
    starter: JobStarter


class Zygote:
    def __init__(
        self,
        fin: int,
        fout: int,
        num_threads: int = 1,
        wake_r: int = -1,
        wake_w: int = -1,
        record: str | None = None,
        method: str = "fork",
    ) -> None:
        self.fin = fin
        self.fout = fout
        self.inbox = FrameDecoder()
        self.queue: collections.deque[ExportRequest] = collections.deque()
        self.batch: set[int] = set()  # queued requests that others of their batch wait behind
        self.cancel_current = False
        self.current_id: int | None = None
        self.exiting = False
        self.wake_r = wake_r  # readable when a signal came (``signal.set_wakeup_fd(wake_w)``)
        # The pipes the worker waits on (``waiting``): select, or polling where pipes
        # have no select (Windows, ``EXPORTLENS_SUPERVISION=portable``).
        self.inputs = make_waiter()
        for fd, key in ((fin, "in"), (wake_r, "wake")):
            if fd >= 0:
                self.inputs.add(fd, key)
        # Forked jobs: one per request, or the standby where that speed-up is on.
        self.forker = plugins.fork_starter(Forker(num_threads))
        # The spawn start method (``startmethod``): every job when ``method`` is
        # "spawn", else the jobs of the files a fork cannot serve (``unforkable``).
        self.method = method
        self.spawner = Spawner(num_threads, self.forker.dying, self.preloaded_modules)
        self.unforkable: set[str] = set()  # files whose jobs are spawned: a fork could not serve them
        # The job whose result is being sent: its lessons are read, then it is killed
        # and let go of (``finish_ending``).
        self.ending: Ending | None = None
        # What the worker holds, watched for changes on disk (``stale``), and the
        # libraries to preload where that speed-up is on.
        self.preloader = Preloader(record, self.send)
        self.speedups = plugins.plug_ins(self.preloader)  # called at each moment of ``hooks.SpeedUp``
        self.idle_since = time.monotonic()  # when the last request ended

    @property
    def stop_requested(self) -> bool:
        """Whether the job running now must end: the pool cancelled it, or we exit."""
        return self.exiting or self.cancel_current

    def send(self, message: FromWorker) -> None:
        write_frame(self.fout, message)

    def read_input(self) -> None:
        """Read what is available on the protocol input and act on it."""
        chunks: list[bytes] = []
        if not self.inputs.read(self.fin, chunks.append, max_chunks=1):
            self.exiting = True
        chunk = b"".join(chunks)
        if not chunk:
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
            mark(f"zygote: request {message.request.id} read")
            self.queue.append(message.request)
            if message.more:
                self.batch.add(message.request.id)
        elif isinstance(message, Cancel):
            if message.id == self.current_id:
                self.cancel_current = True
            for queued in list(self.queue):
                if queued.id == message.id:
                    self.queue.remove(queued)
                    self.batch.discard(queued.id)
                    self.send_cancelled(queued)
        elif isinstance(message, Exit):
            self.exiting = True
        else:
            print(f"exportlens worker: ignoring {type(message).__name__}, not a message for a worker", file=sys.stderr)

    def send_cancelled(self, request: ExportRequest) -> None:
        self.send(Finished(request.id, FileResult(path=request.path), cancelled=True))

    def terminate(self, signum: int, frame: FrameType | None) -> None:
        """SIGTERM: leave as on ``Exit``, taking the job and what it started along."""
        self.exiting = True

    def serve(self) -> None:
        try:
            self._serve()
        finally:
            mark("zygote: exiting")
            self.finish_ending()
            self.forker.drop_standby()
            self.spawner.close()
            kill_strays()  # a worker going away leaves nothing behind either

    def _serve(self) -> None:
        while not self.exiting:
            if not self.queue:
                self.finish_ending()  # first: the standby must not inherit the job's pipes
                if self.idle_work():
                    continue
                if self.input_waiting():
                    # A request already written (a batch's next file, sent as the
                    # result arrived): a standby forked now would be killed unwarmed.
                    self.wait_for_input(0)
                    continue
                (self.spawner if self.method == "spawn" else self.forker).start_standby()
                # Reap what was killed once it is gone, unless a request comes first.
                self.wait_for_input(self.idle_timeout())
                self.forker.reap_dead()
                continue
            self.finish_ending()
            if self.before(self.queue[0]):
                continue
            request = self.queue.popleft()
            self.batch.discard(request.id)
            self.current_id, self.cancel_current = request.id, False
            result = run_request(request, self.run_child)
            if result is not None and self.method == "fork" and request.path not in self.unforkable and fork_refused(result):
                # torch refused CUDA in the fork (its warm-up touched CUDA here): the
                # file's jobs start without fork from now on, this one again first.
                self.unforkable.add(request.path)
                print(f"exportlens worker: {request.path}: CUDA cannot be used in a forked process; its jobs are spawned from now on", file=sys.stderr)
                mark(f"zygote: request {request.id} spawned again: the fork could not use CUDA")
                result = run_request(request, self.run_child)
            self.current_id = None
            if result is None:
                if not self.exiting:
                    self.send_cancelled(request)
            else:
                self.send(Finished(request.id, result))
                mark(f"zygote: request {request.id} result sent")
            self.finish_ending()  # its lessons, and what the speed-ups make of them
            self.after_result()  # those of a job that left processes behind (learned already)
            self.idle_since = time.monotonic()

    def after_result(self) -> None:
        """A request's result is out and its jobs taught what they know: the speed-ups' turn."""
        for speedup in self.speedups:
            speedup.after_result(self)

    def before(self, request: ExportRequest) -> bool:
        """Before the next request starts: the speed-ups' turn. Whether the worker
        retires for one (the request, not started, goes to the next worker)."""
        batch = request.id in self.batch
        for speedup in self.speedups:
            why = speedup.before(self, request, batch)
            if why is not None:
                self.retire(why)
                return True
        return False

    def idle_work(self) -> bool:
        """While no request waits: retire when a library held changed on disk, else
        the speed-ups' idle work. Whether something was done (the loop then looks at
        its input again)."""
        why = self.preloader.stale()
        if why is None:
            idle_s = time.monotonic() - self.idle_since
            for speedup in self.speedups:
                did, why = speedup.idle(self, idle_s)
                if did:
                    break
            else:
                return False
        if why is not None:
            self.retire(why)
        return True

    def idle_timeout(self) -> float | None:
        """How long an idle worker may wait for input before it has something to do."""
        idle_s = time.monotonic() - self.idle_since
        waits = [self.preloader.next_check_s()]
        if self.forker.dying:
            waits.append(REAP_POLL_S)
        waits += [s for s in (speedup.idle_timeout(idle_s) for speedup in self.speedups) if s is not None]
        return min(waits)

    def model_text(self, request: ExportRequest) -> str:
        """The text of the request's model file, as its job will run it."""
        return request.source if request.source is not None else read_model(request.path)

    def drop_standbys(self, forks_only: bool = False) -> None:
        """Kill the job processes started ahead: they lack what the worker is about to
        hold (a spawned one too, unless ``forks_only``: it holds what it imported itself)."""
        self.forker.drop_standby()
        if not forks_only:
            self.spawner.drop_standby()

    def input_waiting(self) -> bool:
        """Whether the pool wrote something not read yet (or the worker is to exit)."""
        if self.exiting:
            return True
        try:
            return "in" in self.inputs.wait(0)
        except (OSError, ValueError):
            return True

    def retire(self, why: str) -> None:
        """Exit now, for the pool to start a fresh worker: what this one holds is stale
        or made it unfit to fork. A request it was given and did not start goes to that one."""
        print(f"exportlens worker: retiring: {why}", file=sys.stderr)
        self.send(Retiring(why))
        self.exiting = True

    def wait_for_input(self, timeout: float | None = None) -> None:
        """Block until the pool writes, then read; or until a signal (SIGTERM) came,
        or ``timeout`` passed."""
        ready = self.inputs.wait(timeout) if self.wake_r >= 0 else self._wait_in_slices(timeout)
        if "wake" in ready:
            self.read_wake()
        if "in" in ready:
            self.read_input()

    def _wait_in_slices(self, timeout: float | None) -> list[str]:
        """Without a wake-up pipe (Windows), wait ``SIGNAL_POLL_S`` at a time: a signal's
        handler runs during the wait and sets ``exiting``, which the next slice sees."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            left = SIGNAL_POLL_S if end is None else min(SIGNAL_POLL_S, max(0.0, end - time.monotonic()))
            ready: list[str] = self.inputs.wait(left)
            if ready or self.exiting or (end is not None and time.monotonic() >= end):
                return ready

    def read_wake(self) -> None:
        """Empty the signal wake-up pipe (the handler did the rest)."""
        self.inputs.read(self.wake_r, lambda chunk: None)

    def run_child(self, request: ExportRequest, tail: Tail) -> Attempt:
        """Run the request in a job process (the standby, else a new fork) and
        supervise it to its end."""
        self.finish_ending()  # an earlier attempt's job, whose pipes the standby must not inherit
        attempt = Attempt()
        starter: JobStarter = self.spawner if self.method == "spawn" or request.path in self.unforkable else self.forker
        job = starter.take_standby(request) or starter.start_job(request)
        mark(f"zygote: request {request.id} in job {job.pid}")
        self.send(JobStarted(request.id, job.pid))
        later = False
        try:
            # The next save's process is forked beside this job, so that a save right
            # after this result finds it warm instead of waiting for a fork and its hot
            # pages; once the job begins exporting, not as it starts: the fork and the
            # standby's warming took the CPU from the job's own start -- running the
            # file, building the model -- while the server, the editor and this zygote
            # are busy with the save too (docs/decisions/0002-standby-job.md).
            supervise(self, job, request, attempt, tail, exporting=lambda: starter.start_standby(busy=job))
            mark(f"zygote: request {request.id} job result read")
            later = attempt.result is not None and self.only_the_job_left(job)
        finally:
            if later:
                # The job has said what the result needs (it flushes its output before
                # its result) and started no process: the result goes out now; its
                # lessons are read after, then it is killed and let go of -- and reaped
                # later: reaping waits for the kernel to free its memory, which nothing
                # the result needs waits for (docs/decisions/0007-result-before-lessons.md).
                drain(job.output_r, tail.add)
                self.ending = Ending(request, job, tail, attempt, starter)
            else:
                if attempt.result is not None:  # it left processes behind: its lessons first, bounded
                    read_lessons(self, job, request, attempt)
                attempt.dump = end_job(job, tail)
                self.reap_strays()
                self.learn(job, attempt, starter)
            mark(f"zygote: request {request.id} job ended")
        return attempt

    def learn(self, job: Job, attempt: Attempt, starter: JobStarter) -> None:
        """What a job taught, for later jobs: the libraries to preload, the fake-tensor
        calls to ask again here, the pages to copy into the standbys."""
        for speedup in self.speedups:
            speedup.learn(attempt, forked=starter is not self.spawner)
        self.forker.learn_from(job.pid)  # written before it closed its event pipe, if at all

    def preloaded_modules(self) -> list[str]:
        """The library modules preloading imported here, in order: what a spawned job
        imports before its request, as a fork would hold them."""
        return [name for modules in self.preloader.modules.values() for name in modules]

    def only_the_job_left(self, job: Job) -> bool:
        """Whether the job has no child and no process it started was left to us
        (which ``reap_strays`` must kill before the result goes out)."""
        if children(job.pid):
            return False
        if not capabilities.PRCTL:
            return True  # no subreaper: nothing the job started is ever handed to us
        known = {job.pid, *self.forker.kept_pids(), *self.spawner.kept_pids(), *self.forker.dying}
        return children(os.getpid()) <= known

    def finish_ending(self) -> None:
        """The job whose result was sent: read the lessons it writes after it
        (``read_lessons``, ``LESSONS_S`` at most), kill it, close its pipes, learn, and
        reap it only once it is gone -- the kernel frees its memory on its own, and a
        request that came meanwhile need not wait for that (``reap_dead`` next
        time, or ``reap_strays``, reaps it)."""
        if self.ending is None:
            return
        ending, self.ending = self.ending, None
        job = ending.job
        read_lessons(self, job, ending.request, ending.attempt)
        signal_group(job.pid)
        self.learn(job, ending.attempt, ending.starter)
        self.after_result()  # what the speed-ups make of it: "let go" marks the end of all the result led to
        close_job(job, ending.tail)
        self.forker.dying.add(job.pid)
        self.forker.reap_dead()
        mark(f"zygote: request {ending.request.id} job let go after its result")

    def reap_strays(self) -> None:
        # What the job started in a new session or by double fork is ours now.
        kill_strays(keep=(*self.forker.kept_pids(), *self.spawner.kept_pids()))
        self.forker.reap_dead()  # those ``kill_strays`` did not reap (no subreaper) wait for the next look


def main() -> None:
    # Keep the protocol on private fds: whatever the model (or torch) prints goes to
    # fd 2, the worker's log, never into the frame stream.
    mark("zygote: started")
    started_ns = time.time_ns()  # a library file changed since may be held in either version
    fin, fout = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    if not become_subreaper():
        print("exportlens worker: cannot become a child subreaper; processes a model starts may outlive it", file=sys.stderr)
    # Importing torch and the first export make about a million objects, and every
    # collection of the oldest generation meanwhile walks all of them: the collector
    # is off until the heap is frozen (docs/decisions/0001-fork-from-a-warm-zygote.md).
    gc.disable()
    one_blas_thread()  # before numpy's OpenBLAS loads with torch
    import torch

    mark("zygote: torch imported")
    num_threads = torch.get_num_threads()
    version = warm_up()
    fakecache.install()  # what jobs' rules are compared with, and how they note their questions
    mark("zygote: warmed up")
    # Everything alive now is shared with every job process; keep the collector from
    # writing to those objects' headers in the jobs (copy-on-write of torch's heap).
    # No collection first: it would walk the whole heap to free little garbage,
    # which stays frozen instead.
    gc.freeze()
    gc.enable()
    mark("zygote: heap frozen")
    wake_r = wake_w = -1
    if capabilities.WAKEUP_PIPE:
        wake_r, wake_w = os.pipe()
        for fd in (wake_r, wake_w):
            os.set_blocking(fd, False)
    options = _options(sys.argv[1:])
    method = options.get("start-method", "fork")
    zygote = Zygote(fin, fout, num_threads, wake_r, wake_w, record=options.get("preload-record") or None, method=method)
    print(f"exportlens worker: start method {method}", file=sys.stderr)
    for line in capabilities.describe():
        print(f"exportlens worker: supervision {line}", file=sys.stderr)
    for name, state in plugins.states():
        print(f"exportlens worker: speed-up {name} {state.why}", file=sys.stderr)
    if wake_w >= 0:
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, zygote.terminate)
    zygote.preloader.start(started_ns)
    zygote.send(WorkerReady(os.getpid(), version))
    zygote.serve()


def _options(argv: list[str]) -> dict[str, str]:
    """``--preload-record PATH`` (where the pool keeps what to preload,
    ``preload_record``) and ``--start-method fork|spawn`` (``startmethod``)."""
    pairs = zip(argv[::2], argv[1::2], strict=False)
    return {key.removeprefix("--"): value for key, value in pairs if key in ("--preload-record", "--start-method")}


if __name__ == "__main__":
    # Every frame of the worker, and of the jobs forked from it, in one chunk of the
    # interpreter's frame stack (``framestack``).
    framestack.call(main)
