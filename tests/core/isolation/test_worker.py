"""The warm worker and the pool, with real worker processes and real model files.

Most cases run as one batch on a shared two-worker pool (module fixture), so the
whole file stays well under two minutes on two cores; each test then checks one
file's result. Fixture models live in ``tests/fixtures/worker/``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from exportlens.core.isolation import capabilities
from exportlens.core.isolation.pool import WorkerPool
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.model.results import FileResult

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "worker"
# Limits no healthy fixture comes near on however loaded a machine: a test meant to
# hit one limit gets that one small, and only that one (never a race between two).
ROOMY = Limits(timeout_s=600, memory_mb=8192)


def request(id: int, name: str, limits: Limits = ROOMY) -> ExportRequest:
    return ExportRequest(id=id, path=str(FIXTURES / f"{name}.py"), root=str(FIXTURES), limits=limits)


def rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerPool]:
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    with WorkerPool(2, log_path=log) as pool:
        pool.wait_ready()
        yield pool


@pytest.fixture(scope="module")
def batch(pool: WorkerPool) -> dict[str, FileResult]:
    """One run of most fixtures; results keyed by file stem."""
    # The job starts as a fork of the zygote, so its resident set starts at the
    # zygote's (torch is in it): the cap is that plus room the hog will exceed.
    cap = max(rss_mb(pid) for pid in pool.worker_pids()) + 700
    requests = [
        request(1, "spam"),  # the slowest first, so the batch finishes sooner
        request(2, "hang", Limits(timeout_s=3, memory_mb=8192)),
        request(3, "hog", Limits(timeout_s=600, memory_mb=cap)),  # only the cap can stop it
        request(4, "segfault"),
        request(5, "exit3"),
        request(6, "sysexit"),
        request(7, "clean"),
        request(8, "parallel"),
        request(9, "segv_import"),
    ]
    results = {Path(r.path).stem: r for r in pool.run(requests)}
    assert len(results) == len(requests)
    return results


def test_pool_does_not_import_torch() -> None:
    code = "import sys, exportlens.core.isolation.pool; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_clean_model_exports(batch: dict[str, FileResult]) -> None:
    result = batch["clean"]
    assert result.diagnostics == ()
    assert [(t.name, t.status, t.line) for t in result.targets] == [("Clean", "ok", 4)]
    assert result.targets[0].signature is not None


def test_segfault_points_at_line_and_other_target_still_exports(
    batch: dict[str, FileResult],
) -> None:
    result = batch["segfault"]
    [diag] = result.diagnostics
    assert (diag.code, diag.line, diag.target) == ("worker-crash", 11, "Crashy")
    assert "SIGSEGV" in diag.message
    assert [(t.name, t.status) for t in result.targets] == [("Crashy", "error"), ("Fine", "ok")]


def test_crash_while_importing_is_file_level(batch: dict[str, FileResult]) -> None:
    [diag] = batch["segv_import"].diagnostics
    assert (diag.code, diag.line, diag.target) == ("worker-crash", 3, None)
    assert "loading segv_import.py" in diag.message
    assert batch["segv_import"].targets == ()


def test_os_exit_is_a_crash_at_its_line(batch: dict[str, FileResult]) -> None:
    [diag] = batch["exit3"].diagnostics
    assert (diag.code, diag.line, diag.target) == ("worker-crash", 8, "Quitter")
    assert "exit code 3" in diag.message


def test_infinite_loop_times_out_at_the_loop(batch: dict[str, FileResult]) -> None:
    [diag] = batch["hang"].diagnostics
    assert (diag.code, diag.line, diag.target) == ("timeout", 6, "Spinner")
    assert "longer than 3 s" in diag.message


def test_memory_hog_is_stopped(batch: dict[str, FileResult]) -> None:
    """The cap is psutil's on every platform. Where no signal asks the job for its
    stack (Windows, ``EXPORTLENS_SUPERVISION=portable``) it points at the target."""
    [diag] = batch["hog"].diagnostics
    assert (diag.code, diag.line, diag.target) == ("out-of-memory", 9 if capabilities.DUMP_SIGNAL else 6, "Hog")


def test_sys_exit_is_the_jobs_import_error(batch: dict[str, FileResult]) -> None:
    codes = [d.code for d in batch["sysexit"].diagnostics]
    assert codes == ["import-error"]
    assert batch["sysexit"].diagnostics[0].line == 5


def test_print_spam_is_kept_as_a_tail(batch: dict[str, FileResult], capfd: pytest.CaptureFixture[str]) -> None:
    result = batch["spam"]
    assert [(t.name, t.status) for t in result.targets] == [("Chatty", "ok")]
    assert 0 < len(result.output_tail.encode()) <= 4096
    assert "the end of the spam" in result.output_tail
    out, err = capfd.readouterr()
    assert out == "" and "spam" not in err


def test_intra_op_parallelism_in_the_job_does_not_deadlock(
    batch: dict[str, FileResult],
) -> None:
    result = batch["parallel"]
    assert [(t.name, t.status) for t in result.targets] == [("Parallel", "ok")]
    assert f"intra-op threads: {os.cpu_count()}" in result.output_tail


def test_workers_survive_and_serve_again(pool: WorkerPool, batch: dict[str, FileResult]) -> None:
    pids = pool.worker_pids()
    results = list(pool.run([request(20, "clean"), request(21, "clean")]))
    assert [r.targets[0].status for r in results] == ["ok", "ok"]
    assert pool.worker_pids() == pids


def _run_in_thread(pool: WorkerPool, requests: list[ExportRequest]) -> tuple[threading.Thread, list[FileResult]]:
    out: list[FileResult] = []
    thread = threading.Thread(target=lambda: out.extend(pool.run(requests)))
    thread.start()
    return thread, out


def _wait_for_job(pool: WorkerPool, request_id: int) -> int:
    end = time.monotonic() + 30
    while time.monotonic() < end:
        pid = pool.job_pid(request_id)
        if pid is not None:
            return pid
        time.sleep(0.05)
    raise AssertionError("the job never started")


def test_cancel_kills_the_job_fast(pool: WorkerPool, batch: dict[str, FileResult]) -> None:
    thread, out = _run_in_thread(pool, [request(30, "hang")])
    job = _wait_for_job(pool, 30)
    pool.cancel(30)
    thread.join(timeout=10)
    assert not thread.is_alive()
    # A timed-out request would yield a `timeout` result; a cancelled one yields
    # nothing, so an empty `out` shows the cancel, not the time limit, ended it.
    assert out == []
    assert not alive(job)
    assert list(pool.run([request(31, "clean")]))[0].targets[0].status == "ok"


def test_pool_replaces_a_killed_worker(pool: WorkerPool, batch: dict[str, FileResult]) -> None:
    before = set(pool.worker_pids())
    thread, out = _run_in_thread(pool, [request(40, "hang")])
    job = _wait_for_job(pool, 40)
    zygote = next(p for p in before if str(job) in Path(f"/proc/{p}/task/{p}/children").read_text().split())
    os.kill(zygote, signal.SIGKILL)
    thread.join(timeout=30)
    [result] = out
    assert [d.code for d in result.diagnostics] == ["worker-crash"]
    if capabilities.PRCTL:
        end = time.monotonic() + 30  # PR_SET_PDEATHSIG is delivered asynchronously
        while alive(job) and time.monotonic() < end:
            time.sleep(0.02)
        assert not alive(job)  # the job died with its zygote
    else:  # no prctl (macOS, Windows, EXPORTLENS_SUPERVISION=portable): it outlives it, as the README says
        assert alive(job)
        os.kill(job, signal.SIGKILL)
    # The replacement warms up and takes work.
    results = list(pool.run([request(41, "clean"), request(42, "clean")]))
    assert [r.targets[0].status for r in results] == ["ok", "ok"]
    assert zygote not in pool.worker_pids() and len(pool.worker_pids()) == 2


# -- model files too deep for Python's recursion (issue 10, finding 11) ------------

CLEAN_MODEL = '''
import torch


class Clean(torch.nn.Module):
    def forward(self, x):
        return x + 1


model = Clean()
example_args = (torch.randn(2),)
'''


def _deep_sum(terms: int) -> str:
    """``x = 1+1+...``: a left-leaning tree ``terms`` deep."""
    return "x = " + "+".join(["1"] * terms) + "\n"


@pytest.mark.adversarial
def test_a_file_too_deep_to_compile_is_a_syntax_error_and_the_worker_lives(pool: WorkerPool, batch: dict[str, FileResult], tmp_path: Path) -> None:
    pids = pool.worker_pids()
    too_deep = tmp_path / "too_deep.py"
    too_deep.write_text(_deep_sum(100_000) + CLEAN_MODEL)
    unary = tmp_path / "unary.py"  # the parser's own stack: MemoryError, not RecursionError
    unary.write_text("x = " + "-" * 100_000 + "1\n" + CLEAN_MODEL)
    requests = [ExportRequest(id=i, path=str(p), root=str(tmp_path), limits=ROOMY) for i, p in enumerate((too_deep, unary), 50)]
    results = {Path(r.path).stem: r for r in pool.run(requests)}
    for name in ("too_deep", "unary"):
        [diag] = results[name].diagnostics
        assert (diag.code, diag.line) == ("syntax-error", 1), diag
        assert "too deeply nested for Python to compile" in diag.message
        assert results[name].targets == ()
    assert pool.worker_pids() == pids  # no worker was lost to the file
    assert list(pool.run([request(52, "clean")]))[0].targets[0].status == "ok"
    assert pool.worker_pids() == pids


@pytest.mark.adversarial
def test_a_file_too_deep_for_our_index_still_exports(pool: WorkerPool, batch: dict[str, FileResult], tmp_path: Path) -> None:
    # Python compiles 1,500 levels; the index's recursive visitor cannot walk them.
    pids = pool.worker_pids()
    deep = tmp_path / "deep_ok.py"
    deep.write_text(_deep_sum(1_500) + CLEAN_MODEL)
    # The same, crashing while it loads: the worker then builds the index itself.
    crash = tmp_path / "deep_crash.py"
    crash.write_text("import ctypes\n" + _deep_sum(1_500) + "ctypes.string_at(0)\n")
    requests = [ExportRequest(id=i, path=str(p), root=str(tmp_path), limits=ROOMY) for i, p in enumerate((deep, crash), 53)]
    results = {Path(r.path).stem: r for r in pool.run(requests)}
    assert results["deep_ok"].diagnostics == ()
    assert [(t.name, t.status) for t in results["deep_ok"].targets] == [("Clean", "ok")]
    [crashed] = results["deep_crash"].diagnostics
    assert (crashed.code, crashed.line) == ("worker-crash", 3)
    assert pool.worker_pids() == pids

