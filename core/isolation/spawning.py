"""Job processes started without fork: the ``spawn`` start method (``startmethod``).

Where fork is missing (Windows) or unsafe (macOS), or cannot serve a file (CUDA: a
fork of a process whose torch touched CUDA cannot use CUDA, ``zygote``), a job is a
fresh interpreter, ``python -P -m exportlens.core.isolation.spawning``: it imports
torch, runs the same warm-up as the worker, imports the libraries the worker holds
from preloading (the ones the file's earlier jobs imported, under the same refusal
rule), and only then takes its request. One is started ahead, the *standby*, so a
save does not wait for the interpreter: a request goes to it whether or not it is
warm yet (a fresh one would only be further behind), and the job's clock starts
when it says it is warm (``StandbyWarm``), not at its start.

It is supervised exactly as a forked job is (``supervise``): the same three channels
(its events, its output, its stack dump), its own process group, killed with it,
dying with the worker (``die_with``), its memory and time watched by the zygote, its
stray descendants killed by the zygote's subreaper. What it cannot share with a fork:
the zygote's warm heap, its fake-tensor cache answers and the hot pages; so it starts
as torch's own fresh process does.

Started with ``os.posix_spawn`` (Linux, macOS): the job is a plain child pid of the
zygote, as a fork is, so waiting, signals and ``/proc`` work unchanged. Where there is
none (Windows; ``capabilities.POSIX_SPAWN``, off on Linux under
``EXPORTLENS_SUPERVISION=portable``), with ``subprocess.Popen``, in its own process
group, waited on and reaped through that ``Popen`` (``procs.adopt``); its channels are
passed as fds on POSIX, and on Windows as inheritable handles whose numbers its
arguments carry and which it opens as fds (``_channel``). Torch-free on the zygote's side.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from exportlens.core.isolation import capabilities
from exportlens.core.isolation.forking import Job, Standby, dump_file
from exportlens.core.isolation.messages import Export, Message, StandbyWarm, read_frame, write_frame
from exportlens.core.isolation.procs import adopt, exit_code, kill_group, signal_group
from exportlens.core.isolation.speedups import framestack
from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import FileResult
from exportlens.core.trace import mark

ENTRY = "exportlens.core.isolation.spawning"
# torch's words when a fork of a process whose torch initialised CUDA asks for CUDA
# (``torch.cuda._lazy_init``, after its ``_is_in_bad_fork()`` check).
FORK_REFUSED = "Cannot re-initialize CUDA in forked subprocess"


def fork_refused(result: FileResult) -> bool:
    """Whether torch refused CUDA to a forked job: its error in a diagnostic, or in
    the output (a model that caught and printed it). A fresh process gets torch's
    own answer instead: the program where there is a GPU, its error where there is none."""
    return any(FORK_REFUSED in d.message for d in result.diagnostics) or FORK_REFUSED in result.output_tail


@dataclass
class Spawner:
    """Starts job processes without fork for one zygote and holds its standby: the
    ``starters.JobStarter`` of the ``spawn`` start method.

    ``dying`` is the Forker's set (killed, not reaped yet): one zygote reaps both.
    ``preloaded``: the library modules the zygote holds from preloading, in import
    order, for each new process to import before its request.
    """

    num_threads: int = 1
    dying: set[int] = field(default_factory=set)
    preloaded: Callable[[], list[str]] = list
    standby: Standby | None = None
    folder: str | None = None  # a private folder for the preload list

    def start_job(self, request: ExportRequest) -> Job:
        """Spawn a job process for the request (no standby was there to take it)."""
        mark(f"zygote: fresh spawn for request {request.id}")
        job, request_w = self._spawn()
        _send(request_w, request)
        return job

    def start_standby(self, busy: Job | None = None) -> None:
        """Start the next job process now, while nothing waits (never beside a job:
        importing torch would take the CPU the job needs)."""
        if self.standby is not None or busy is not None:
            return
        job, request_w = self._spawn()
        self.standby = Standby(job, request_w)
        mark(f"zygote: spawned standby {job.pid}")

    def take_standby(self, request: ExportRequest) -> Job | None:
        """Hand the request to the standby, warm or not, if it is alive (it reads its
        request while it warms up, so the write never waits for the warm-up)."""
        standby, self.standby = self.standby, None
        if standby is None:
            return None
        try:
            done = exit_code(standby.job.pid) is not None
        except ChildProcessError:
            done = True
        if done:  # it died warming up (and is reaped now)
            self._close(standby)
            return None
        if _send(standby.request_w, request):  # closes its end either way
            mark(f"zygote: spawned standby {standby.job.pid} takes request {request.id}")
            return standby.job
        signal_group(standby.job.pid)
        self.dying.add(standby.job.pid)
        self._close(standby, request_w=False)
        return None

    def learn_from(self, pid: int) -> None:
        """Nothing to learn: a spawned job shares no pages with the zygote."""

    def kept_pids(self) -> tuple[int, ...]:
        return (self.standby.job.pid,) if self.standby else ()

    def drop_standby(self) -> None:
        standby, self.standby = self.standby, None
        if standby is not None:
            signal_group(standby.job.pid)
            self.dying.add(standby.job.pid)
            self._close(standby)
            mark(f"zygote: spawned standby {standby.job.pid} dropped")

    def close(self) -> None:
        standby, self.standby = self.standby, None
        if standby is not None:
            kill_group(standby.job.pid)
            self._close(standby)
        if self.folder is not None:
            for name in os.listdir(self.folder):
                os.unlink(os.path.join(self.folder, name))
            os.rmdir(self.folder)
            self.folder = None

    def _close(self, standby: Standby, request_w: bool = True) -> None:
        for fd in (standby.request_w if request_w else -1, standby.job.events_r, standby.job.output_r, standby.job.dump_fd):
            if fd < 0:
                continue
            try:
                os.close(fd)
            except OSError:
                pass

    def _preload_file(self) -> str:
        """The modules to preload, written where the process reads them (a list of
        thousands of names does not fit an argument)."""
        if self.folder is None:
            self.folder = tempfile.mkdtemp(prefix="exportlens-spawn-")
        path = os.path.join(self.folder, "preload.json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(self.preloaded(), f)
        os.replace(path + ".tmp", path)
        return path

    def _spawn(self) -> tuple[Job, int]:
        """Start ``python -P -m ENTRY``: its request on fd 0, its events, output and
        stack dump on the fds named in its arguments, fds 1 and 2 the worker's log
        until it takes a request (the warm-up's noise is not the model's output)."""
        request_r, request_w = os.pipe()
        events_r, events_w = os.pipe()
        output_r, output_w = os.pipe()
        dump_fd = dump_file()
        passed = (events_w, output_w, dump_fd)
        events, output, dump = _channel_numbers(passed)
        argv = [
            sys.executable, "-P", "-m", ENTRY,
            "--events", str(events), "--output", str(output), "--dump", str(dump),
            "--threads", str(self.num_threads), "--parent", str(os.getpid()),
            "--preload", self._preload_file(),
        ]  # fmt: skip
        env = dict(os.environ)
        from exportlens.core.isolation.speedups.preload import PINNED_BLAS

        if PINNED_BLAS:  # the worker's own choice, not the user's: a fresh job needs none
            env.pop("OPENBLAS_NUM_THREADS", None)
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = _launch(argv, env, request_r, passed)
        finally:
            for fd in (request_r, events_w, output_w):
                os.close(fd)
        os.set_blocking(events_r, False)
        os.set_blocking(output_r, False)
        return Job(pid, events_r, output_r, dump_fd, spawned=True), request_w


def _launch(argv: list[str], env: dict[str, str], request_r: int, passed: tuple[int, ...]) -> int:
    """Start the job process in a new process group, ``request_r`` its stdin and
    ``passed`` open in it (under the numbers ``_channel_numbers`` gave its arguments); its pid."""
    if capabilities.POSIX_SPAWN:
        for fd in passed:
            os.set_inheritable(fd, True)
        try:
            return os.posix_spawn(sys.executable, argv, env, file_actions=[(os.POSIX_SPAWN_DUP2, request_r, 0)], setpgroup=0)
        finally:
            os.set_inheritable(passed[-1], False)  # the dump's fd stays the worker's; the pipes' ends are closed
    if sys.platform == "win32":  # handles, not fds, are inherited: only those listed
        handles = _channel_numbers(passed)
        for handle in handles:
            os.set_handle_inheritable(handle, True)
        try:
            info = subprocess.STARTUPINFO(lpAttributeList={"handle_list": handles})
            process = subprocess.Popen(argv, stdin=request_r, env=env, startupinfo=info, creationflags=subprocess.CREATE_NEW_PROCESS_GROUP)
        finally:
            os.set_handle_inheritable(handles[-1], False)
    else:
        process = subprocess.Popen(argv, stdin=request_r, env=env, pass_fds=passed, process_group=0)
    return adopt(process)


def _channel_numbers(passed: tuple[int, ...]) -> list[int]:
    """What the job's arguments name its channels by: their fds, on Windows their handles."""
    if sys.platform == "win32":
        import msvcrt

        return [msvcrt.get_osfhandle(fd) for fd in passed]
    return list(passed)


def _channel(number: str) -> int:
    """In the job: the fd of a channel its arguments name (``_channel_numbers``)."""
    if sys.platform == "win32":
        import msvcrt

        return msvcrt.open_osfhandle(int(number), 0)
    return int(number)


def _send(request_w: int, request: ExportRequest) -> bool:
    """Write the request and close the pipe (a job reads one); False when it is gone."""
    try:
        write_frame(request_w, Export(request))
        return True
    except OSError:
        return False
    finally:
        os.close(request_w)


# ---- in the spawned process -------------------------------------------------------


def _args(argv: list[str]) -> dict[str, str]:
    pairs = zip(argv[::2], argv[1::2], strict=False)
    return {key.removeprefix("--"): value for key, value in pairs}


def main(argv: list[str]) -> None:
    """The spawned job process: warm up, preload, say so, take the request, run it."""
    started_ns = time.time_ns()
    args = _args(argv)
    events_fd, output_fd, dump_fd = _channel(args["events"]), _channel(args["output"]), _channel(args["dump"])
    # The request is read while torch imports: the worker writes it as soon as it has
    # one, and a large one (unsaved text) must not wait in a full pipe for the warm-up.
    request: list[Message | None] = [None]
    reader = threading.Thread(target=_read_request, args=(request,), name="exportlens-request", daemon=True)
    reader.start()
    from exportlens.core.isolation.jobprocess import child_main, die_with
    from exportlens.core.isolation.warmup import warm_up

    die_with(int(args["parent"]))
    mark("spawned: started")
    gc.disable()  # as in the worker: the collector only costs time while torch imports
    version = ""
    try:
        version = warm_up()
        _preload(args.get("preload"), started_ns)
        from exportlens.core.isolation.speedups import fakecache

        fakecache.install()  # the rules this job's are compared with (``fakecache.guard``)
    except BaseException as e:  # noqa: BLE001 - a failed warm-up only costs speed; the job says what breaks
        print(f"exportlens spawned job: warm-up failed: {type(e).__name__}: {e}", file=sys.stderr)
    gc.freeze()  # torch's objects out of the collector's reach, as in a fork of the worker
    gc.enable()
    mark(f"spawned: warm (torch {version})")
    write_frame(events_fd, StandbyWarm())  # the job's clock starts now (``supervise``)
    reader.join()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # a model reads no stdin, as in a forked job
    os.close(devnull)
    message = request[0]
    if not isinstance(message, Export):
        os._exit(0)  # the pipe closed without one: a standby dropped
    child_main(message.request, events_fd, output_fd, dump_fd, int(args.get("threads", "1")), forked=False)
    os._exit(70)  # not reached: child_main exits


def _read_request(into: list[Message | None]) -> None:
    try:
        into[0] = read_frame(0)
    except BaseException:  # noqa: BLE001 - garbage on our own pipe: exit quietly
        into[0] = None


def _preload(path: str | None, started_ns: int) -> None:
    """Import the modules the worker preloaded, as its forks would hold them."""
    if not path:
        return
    try:
        with open(path, encoding="utf-8") as f:
            names = [n for n in json.load(f) if isinstance(n, str)]
    except (OSError, ValueError):
        return
    import importlib

    from exportlens.core.export import libraries, library_units

    tops: set[str] = set()
    for name in names:
        try:
            importlib.import_module(name)
            tops.add(name.partition(".")[0])
        except BaseException:  # noqa: BLE001 - the worker imported it; a job imports it again if it needs it
            pass
    libraries.hold(started_ns)
    libraries.PRELOADED = frozenset(tops)
    library_units.learn()


if __name__ == "__main__":
    framestack.call(main, sys.argv[1:])  # as the worker's (``zygote``)
