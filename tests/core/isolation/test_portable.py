"""The supervision without what only Linux offers, forced here: no ``select`` on pipes
(Windows), no ``/proc`` and no ``prctl`` (macOS, Windows) -- ``EXPORTLENS_SUPERVISION=portable``
(``core/isolation/capabilities.py``). The waiters alone, the ``/proc`` readers in a
process started in that mode, then a real pool whose workers run in it: exports,
timeouts, crashes, output, cancellation and a job's children, as the platforms
without those would take them. (The whole suite runs in that mode with the variable set.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from exportlens.core.isolation import capabilities
from exportlens.core.isolation.pool import WorkerPool
from exportlens.core.isolation.startmethod import StartMethod
from exportlens.core.isolation.waiting import PollWaiter, SelectWaiter, Waiter, read_within
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.model.results import FileResult

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "worker"
ROOMY = Limits(timeout_s=600, memory_mb=8192)
PORTABLE = {capabilities.ENV: "portable"}


# ---- the waiters, side by side ------------------------------------------------------


@pytest.fixture(params=[SelectWaiter, PollWaiter])
def waiter(request: pytest.FixtureRequest) -> Iterator[Waiter]:
    made: Waiter = request.param()
    yield made
    made.close()


def _pipe() -> tuple[int, int]:
    r, w = os.pipe()
    os.set_blocking(r, False)
    return r, w


def test_a_waiter_names_the_pipe_written_to_and_reads_it_whole(waiter: Waiter) -> None:
    a_r, a_w = _pipe()
    b_r, b_w = _pipe()
    waiter.add(a_r, "a")
    waiter.add(b_r, "b")
    assert waiter.wait(0.05) == []
    os.write(b_w, b"hello ")
    os.write(b_w, b"world")
    assert waiter.wait(5) == ["b"]
    chunks: list[bytes] = []
    assert waiter.read(b_r, chunks.append) is True
    assert b"".join(chunks) == b"hello world"
    assert waiter.wait(0) == []
    for fd in (a_r, a_w, b_r, b_w):
        os.close(fd)


def test_a_waiter_names_a_pipe_at_its_end_and_read_says_so(waiter: Waiter) -> None:
    r, w = _pipe()
    waiter.add(r, "events")
    os.write(w, b"last words")
    os.close(w)
    assert waiter.wait(5) == ["events"]
    chunks: list[bytes] = []
    while waiter.read(r, chunks.append):
        assert waiter.wait(5) == ["events"]
    assert b"".join(chunks) == b"last words"
    assert waiter.remove(r) == []
    os.close(r)


def test_a_waiter_wakes_for_a_write_from_another_thread(waiter: Waiter) -> None:
    r, w = _pipe()
    waiter.add(r, "in")
    timer = threading.Timer(0.2, os.write, (w, b"x"))
    timer.start()
    started = time.monotonic()
    assert waiter.wait(None) == ["in"]
    assert time.monotonic() - started >= 0.15
    timer.join()
    for fd in (r, w):
        os.close(fd)


def test_what_a_poll_read_and_nobody_took_comes_back_on_remove() -> None:
    waiter = PollWaiter()
    r, w = _pipe()
    waiter.add(r, "output")
    os.write(w, b"the model's last line\n")
    assert waiter.wait(5) == ["output"]
    assert waiter.remove(r) == [b"the model's last line\n"]
    for fd in (r, w):
        os.close(fd)


def test_a_poll_read_is_held_for_a_read_bounded_in_chunks() -> None:
    waiter = PollWaiter()
    r, w = _pipe()
    waiter.add(r, "in")
    os.write(w, b"one")
    assert waiter.wait(5) == ["in"]
    os.write(w, b"two")
    chunks: list[bytes] = []
    assert waiter.read(r, chunks.append, max_chunks=1) is True
    assert chunks == [b"one"]  # the held chunk is the one read; the rest waits
    assert waiter.wait(5) == ["in"]
    assert waiter.read(r, chunks.append, max_chunks=1) is True
    assert chunks == [b"one", b"two"]
    for fd in (r, w):
        os.close(fd)


@pytest.mark.parametrize("select_pipes", [True, False])
def test_read_within_waits_for_the_first_bytes_or_gives_up(monkeypatch: pytest.MonkeyPatch, select_pipes: bool) -> None:
    monkeypatch.setattr(capabilities, "SELECT_PIPES", select_pipes)
    r, w = _pipe()
    assert read_within(r, 0.0) is None
    assert read_within(r, 0.05) is None
    threading.Timer(0.1, os.write, (w, b"warm")).start()
    assert read_within(r, 10) == b"warm"
    os.close(w)
    assert read_within(r, 1) == b""
    os.close(r)


# ---- what the process files give, where there are none ---------------------------------

PROBE = """
import json, os, subprocess, sys, time
from exportlens.core.isolation import capabilities, procs, reaper, jobclock
from exportlens.core.isolation.speedups import preload, hotpages
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
out = {
    "root": capabilities.PROC_ROOT, "select": capabilities.SELECT_PIPES, "prctl": capabilities.PRCTL,
    "rss": procs.rss_kb(os.getpid()), "children": sorted(reaper.children(os.getpid())),
    "delay": jobclock.run_delay_s(os.getpid()),
    "self_rss": preload.rss_kb(), "mappings": hotpages.writable_mappings(), "anon": hotpages.anon_resident_pages(),
    "subreaper": reaper.become_subreaper(), "strays": reaper.kill_strays(),
    "describe": capabilities.describe(), "child": child.pid,
}
child.kill(); child.wait()
print(json.dumps(out))
"""


def _probe(env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, **env}, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_with_proc_the_readers_see_the_process() -> None:
    seen = _probe({capabilities.ENV: "", capabilities.PROC_ENV: ""})  # whatever mode the suite runs in
    assert seen["root"] == "/proc" and seen["select"] is True and seen["prctl"] is True
    assert isinstance(seen["rss"], int) and seen["rss"] > 1000 and isinstance(seen["self_rss"], int) and seen["self_rss"] > 1000
    assert seen["children"] == [seen["child"]]
    assert seen["strays"] == 1  # the child, killed and reaped
    assert isinstance(seen["delay"], float)
    assert seen["mappings"] and seen["subreaper"] is True


@pytest.mark.parametrize("env", [PORTABLE, {capabilities.PROC_ENV: "<empty>"}], ids=["portable", "empty-proc-root"])
def test_without_proc_psutil_still_reads_memory_and_children_and_nothing_crashes(env: dict[str, str], tmp_path: Path) -> None:
    env = {k: str(tmp_path) if v == "<empty>" else v for k, v in env.items()}
    seen = _probe(env)
    assert seen["root"] is None
    # psutil's, as on macOS and Windows: the memory (the cap) and the child are seen.
    assert isinstance(seen["rss"], int) and seen["rss"] > 1000 and isinstance(seen["self_rss"], int) and seen["self_rss"] > 1000
    assert seen["children"] == [seen["child"]]
    assert seen["delay"] is None  # the wall clock counts whole
    assert seen["mappings"] == [] and seen["anon"] == 0  # no hot pages
    assert any("no /proc" in line for line in seen["describe"])  # type: ignore[union-attr]
    assert not any("no memory cap" in line for line in seen["describe"])  # type: ignore[union-attr]
    if env.get(capabilities.ENV) == "portable":
        assert seen["select"] is False and seen["prctl"] is False and seen["subreaper"] is False
        assert seen["strays"] == 0  # no subreaper: its children are none of the strays'
        assert any("polling" in line for line in seen["describe"])  # type: ignore[union-attr]
    else:
        assert seen["strays"] == 1  # a subreaper's child, found by psutil, killed and reaped


def test_exportlens_version_says_what_the_supervision_has() -> None:
    out = subprocess.run([sys.executable, "-m", "exportlens", "version"], env={**os.environ, **PORTABLE}, capture_output=True, text=True, timeout=120, check=True).stdout
    [row] = [line for line in out.splitlines() if line.startswith("supervision")]
    assert "polling" in row and "with psutil (the memory cap)" in row and "no prctl" in row
    assert "no memory cap" not in row


# ---- a real pool whose workers have none of it ------------------------------------------


def request(id: int, name: str, limits: Limits = ROOMY) -> ExportRequest:
    return ExportRequest(id=id, path=str(FIXTURES / f"{name}.py"), root=str(FIXTURES), limits=limits)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:  # the test's own look, not the worker's
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture(scope="module", params=["fork", "spawn"])
def portable_pool(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WorkerPool, Path]]:
    """One worker, started in the portable mode: the pool here polls its pipes, and
    the worker (environment inherited) polls its own, has no /proc and no prctl."""
    log = tmp_path_factory.mktemp("portable") / "worker.log"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(capabilities.ENV, "portable")
        patch.setattr(capabilities, "SELECT_PIPES", False)
        with WorkerPool(1, log_path=log, start_method=StartMethod(request.param, "the test")) as pool:
            pool.wait_ready()
            yield pool, log


@pytest.fixture(scope="module")
def portable_batch(portable_pool: tuple[WorkerPool, Path]) -> dict[str, FileResult]:
    pool, _ = portable_pool
    # The job's resident set starts at least at a fresh torch's: the cap is the
    # worker's plus room the hog will exceed, so that only the cap can stop it.
    cap = max(psutil.Process(pid).memory_info().rss >> 20 for pid in pool.worker_pids()) + 700
    requests = [
        request(1, "spam"),
        request(2, "hang", Limits(timeout_s=3, memory_mb=8192)),
        request(6, "hog", Limits(timeout_s=600, memory_mb=cap)),
        request(3, "segfault"),
        request(4, "exit3"),
        request(5, "clean"),
    ]
    results = {Path(r.path).stem: r for r in pool.run(requests)}
    assert len(results) == len(requests)
    return results


def test_the_worker_log_says_what_its_supervision_lacks(portable_pool: tuple[WorkerPool, Path], portable_batch: dict[str, FileResult]) -> None:
    _, log = portable_pool
    text = log.read_text(errors="replace")
    assert "supervision waits on pipes by polling" in text
    assert "reads jobs' memory and children with psutil (the memory cap)" in text
    assert "no /proc ($EXPORTLENS_SUPERVISION=portable): the timeout counts the wall clock" in text
    assert "no posix_spawn ($EXPORTLENS_SUPERVISION=portable): a spawned job is started, waited on and killed through subprocess.Popen" in text
    assert "no faulthandler.register or SIGUSR1 ($EXPORTLENS_SUPERVISION=portable)" in text


def test_without_select_or_proc_a_clean_model_exports(portable_batch: dict[str, FileResult]) -> None:
    result = portable_batch["clean"]
    assert result.diagnostics == ()
    assert [(t.name, t.status, t.line) for t in result.targets] == [("Clean", "ok", 4)]


def test_without_select_or_proc_an_endless_loop_times_out_at_its_line(portable_batch: dict[str, FileResult]) -> None:
    """No signal asks the job for its stack (Windows): the job's own watchdog wrote it
    just before its time was up (``jobprocess._dump_before_timeout``)."""
    [diag] = portable_batch["hang"].diagnostics
    assert (diag.code, diag.line, diag.target) == ("timeout", 6, "Spinner")


def test_without_select_or_proc_a_memory_hog_is_stopped_by_its_cap(portable_batch: dict[str, FileResult]) -> None:
    """The memory cap reads the job's memory with psutil, as on macOS and Windows. No
    signal asks the job for its stack before the kill (Windows): the diagnostic points
    at its target's line, where Linux's and macOS's name the hoarding line (9)."""
    [diag] = portable_batch["hog"].diagnostics
    assert (diag.code, diag.line, diag.target) == ("out-of-memory", 6, "Hog")


def test_without_select_or_proc_crashes_point_at_their_lines(portable_batch: dict[str, FileResult]) -> None:
    [segv] = portable_batch["segfault"].diagnostics
    assert (segv.code, segv.line, segv.target) == ("worker-crash", 11, "Crashy")
    assert [(t.name, t.status) for t in portable_batch["segfault"].targets] == [("Crashy", "error"), ("Fine", "ok")]
    [exit3] = portable_batch["exit3"].diagnostics
    assert (exit3.code, exit3.line, "exit code 3" in exit3.message) == ("worker-crash", 8, True)


def test_without_select_or_proc_the_output_tail_is_kept(portable_batch: dict[str, FileResult]) -> None:
    result = portable_batch["spam"]
    assert [(t.name, t.status) for t in result.targets] == [("Chatty", "ok")]
    assert 0 < len(result.output_tail.encode()) <= 4096 and "the end of the spam" in result.output_tail


def test_without_select_or_proc_a_cancel_kills_the_job(portable_pool: tuple[WorkerPool, Path], portable_batch: dict[str, FileResult]) -> None:
    pool, _ = portable_pool
    out: list[FileResult] = []
    thread = threading.Thread(target=lambda: out.extend(pool.run([request(30, "hang")])))
    thread.start()
    end = time.monotonic() + 300
    while (job := pool.job_pid(30)) is None and time.monotonic() < end:
        time.sleep(0.05)
    assert job is not None, "the job never started"
    pool.cancel(30)
    thread.join(timeout=60)
    assert not thread.is_alive() and out == []
    assert not alive(job)
    assert list(pool.run([request(31, "clean")]))[0].targets[0].status == "ok"


CHILD_MODEL = """
import subprocess, sys
import torch

child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session={new_session})
with open({pid_file!r}, "w") as f:
    f.write(str(child.pid))


class Parent(torch.nn.Module):
    def forward(self, x):
        return x + 1


model = Parent()
example_args = (torch.randn(2),)
"""


@pytest.mark.parametrize("new_session", [False, True], ids=["its-group", "new-session"])
def test_without_proc_a_jobs_child_dies_with_it(portable_pool: tuple[WorkerPool, Path], tmp_path: Path, new_session: bool) -> None:
    """The process group (``taskkill /T`` on Windows) ends what a job started in it;
    what left the group (a new session) is found by psutil below the job as it is
    killed (``procs.signal_group``: no subreaper is handed it)."""
    pool, _ = portable_pool
    pid_file = tmp_path / "child.pid"
    model = tmp_path / "parent.py"
    model.write_text(CHILD_MODEL.format(pid_file=str(pid_file), new_session=new_session))
    [result] = pool.run([ExportRequest(id=50 + new_session, path=str(model), root=str(tmp_path), limits=ROOMY)])
    assert [(t.name, t.status) for t in result.targets] == [("Parent", "ok")]
    child = int(pid_file.read_text())
    end = time.monotonic() + 30
    while alive(child) and time.monotonic() < end:
        time.sleep(0.05)
    assert not alive(child)


# ---- a job started without posix_spawn: through subprocess.Popen -----------------------

POPEN_PROBE = """
import json, os, sys
from exportlens.core.isolation import capabilities, procs
from exportlens.core.isolation.spawning import Spawner
spawner = Spawner()
spawner.start_standby()
pid = spawner.standby.job.pid
process = procs._started.get(pid)
out = {"posix_spawn": capabilities.POSIX_SPAWN, "adopted": process is not None, "running": procs.exit_code(pid)}
spawner.close()  # kills its group and reaps it through the Popen
out["left"] = pid in procs._started
out["returncode"] = process.returncode if process is not None else None
try:
    os.waitpid(pid, os.WNOHANG)
    out["child"] = True
except ChildProcessError:
    out["child"] = False
print(json.dumps(out))
"""


def test_without_posix_spawn_a_spawned_job_is_started_and_reaped_through_popen() -> None:
    done = subprocess.run([sys.executable, "-c", POPEN_PROBE], env={**os.environ, **PORTABLE}, capture_output=True, text=True, timeout=120, check=True)
    seen = json.loads(done.stdout)
    assert seen["posix_spawn"] is False and seen["adopted"] is True and seen["running"] is None
    assert seen["left"] is False and seen["returncode"] == -9  # SIGKILL, seen by the Popen
    assert seen["child"] is False  # reaped: no zombie left to os.waitpid


def test_exit_code_reads_a_popen_job_and_a_forked_one_alike() -> None:
    from exportlens.core.isolation import procs
    from exportlens.core.isolation.failure import exit_text

    process = subprocess.Popen([sys.executable, "-c", "import os; os._exit(3)"])
    pid = procs.adopt(process)
    end = time.monotonic() + 60
    while (code := procs.exit_code(pid)) is None and time.monotonic() < end:
        time.sleep(0.01)
    assert code == 3 and pid not in procs._started
    assert "exit code 3" in exit_text(code)
    forked = os.fork()
    if forked == 0:
        os.kill(os.getpid(), 9)
    while (code := procs.exit_code(forked)) is None and time.monotonic() < end:
        time.sleep(0.01)
    assert code == -9 and exit_text(code).startswith("with SIGKILL")
    with pytest.raises(ChildProcessError):
        procs.exit_code(forked)  # reaped before
    procs.reap(forked)  # nothing left to wait for: no error


@pytest.mark.parametrize("pread", [True, False])
def test_a_stack_dump_is_read_from_its_start_with_or_without_pread(monkeypatch: pytest.MonkeyPatch, pread: bool, tmp_path: Path) -> None:
    from exportlens.core.isolation import forking

    monkeypatch.setattr(capabilities, "PREAD", pread)
    fd = os.open(tmp_path / "dump", os.O_RDWR | os.O_CREAT)
    os.write(fd, b"Fatal Python error: Segmentation fault\n" * 100)  # the offset left at its end
    assert forking.read_head(fd, 39) == b"Fatal Python error: Segmentation fault\n"
    assert len(forking.read_head(fd, 1 << 20)) == 3900
    os.close(fd)


def test_without_a_wake_up_pipe_a_waiting_worker_leaves_cleanly_on_sigterm(tmp_path: Path) -> None:
    """Windows's ``signal.set_wakeup_fd`` takes no pipe: the worker then waits in slices
    (``zygote.SIGNAL_POLL_S``) and its SIGTERM handler ends it as ``Exit`` would, exit code
    0, its spawned standby taken along -- not the signal's default death."""
    log = tmp_path / "worker.log"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(capabilities.ENV, "portable")
        patch.setattr(capabilities, "SELECT_PIPES", False)
        with WorkerPool(1, log_path=log, start_method=StartMethod("spawn", "the test")) as pool:
            pool.wait_ready()
            [worker] = [w for w in pool._workers if w.proc.pid in pool.worker_pids()]
            [result] = pool.run([request(60, "clean")])  # a job ran; its standby is started after
            assert result.targets[0].status == "ok"
            os.kill(worker.proc.pid, signal.SIGTERM)
            assert worker.proc.wait(timeout=120) == 0
    assert "no signal wake-up pipe ($EXPORTLENS_SUPERVISION=portable)" in log.read_text(errors="replace")
