"""Jobs leave nothing behind: processes a model starts in a new session (``setsid``)
or by double fork die with its job -- after an export, a timeout, a crash, a cancel --
and with the worker when the pool closes.

Each model records the pids of its two sleepers in a file; the test reads them.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from exportlens.core.isolation.pool import WorkerPool
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.model.results import FileResult

pytestmark = [
    pytest.mark.adversarial,
    # Found as the worker's children once their parents are gone: a subreaper and /proc.
    pytest.mark.needs_proc("killing the processes a job starts outside its process group"),
]

MARKER = "7531.5"  # the sleepers' argument: how the test tells them from other processes

SPAWN = '''
import ctypes
import os
import subprocess

import torch


def record(pid):
    with open({pids!r}, "a") as f:
        f.write(f"{{pid}}\\n")


# A sleeper in a new session and process group: killing the job's group misses it.
record(subprocess.Popen(["sleep", "{marker}"], start_new_session=True).pid)
# A daemon by double fork: its parent exits at once, so it is orphaned.
exec_r, exec_w = os.pipe()  # close-on-exec: EOF once the daemon runs sleep
child = os.fork()
if child == 0:
    os.setsid()
    grandchild = os.fork()
    if grandchild == 0:
        os.execvp("sleep", ["sleep", "{marker}"])
    os.close(exec_w)
    os.read(exec_r, 1)
    record(grandchild)
    os._exit(0)
os.close(exec_w)
os.close(exec_r)
os.waitpid(child, 0)
'''

MODEL = '''

class Model(torch.nn.Module):
    def forward(self, x):
        {body}
        return x + 1


model = Model()
example_args = (torch.randn(2),)
'''

BODIES = {
    "ok": "pass",
    "hang": "while True: pass",
}


def write_model(tmp_path: Path, name: str, body: str = "pass", crash: bool = False) -> tuple[Path, Path]:
    pids = tmp_path / f"{name}.pids"
    model = tmp_path / f"{name}.py"
    text = SPAWN.format(pids=str(pids), marker=MARKER)
    text += "ctypes.string_at(0)\n" if crash else MODEL.format(body=body)
    model.write_text(text)
    return model, pids


def sleeper_alive(pid: int) -> bool:
    """Whether pid is one of our sleepers and not a zombie."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return MARKER.encode() in cmdline and state != "Z"


def recorded(pids: Path, count: int = 2, timeout: float = 120.0) -> list[int]:
    """The sleepers' pids, once the model recorded ``count`` of them (it runs in the job)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = [int(p) for p in pids.read_text().split()] if pids.exists() else []
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"the model never recorded {count} sleepers")


@pytest.fixture(autouse=True)
def no_sleeper_survives(tmp_path: Path) -> Iterator[None]:
    """Whatever the outcome, kill the sleepers the test started (a failing run leaves them)."""
    yield
    for pids in tmp_path.glob("*.pids"):
        for pid in (int(p) for p in pids.read_text().split()):
            if sleeper_alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    with WorkerPool(1) as pool:
        pool.wait_ready()
        yield pool


def run_one(pool: WorkerPool, model: Path, limits: Limits) -> FileResult:
    [result] = pool.run([ExportRequest(id=1, path=str(model), root=str(model.parent), limits=limits)])
    return result


def test_an_export_leaves_no_process_behind(pool: WorkerPool, tmp_path: Path) -> None:
    model, pids = write_model(tmp_path, "ok")
    result = run_one(pool, model, Limits(timeout_s=600, memory_mb=8192))
    assert [(t.name, t.status) for t in result.targets] == [("Model", "ok")]
    sleepers = recorded(pids)
    assert [p for p in sleepers if sleeper_alive(p)] == []


def test_a_timeout_leaves_no_process_behind(pool: WorkerPool, tmp_path: Path) -> None:
    model, pids = write_model(tmp_path, "hang", BODIES["hang"])
    result = run_one(pool, model, Limits(timeout_s=3, memory_mb=8192))
    assert [d.code for d in result.diagnostics] == ["timeout"]
    assert [p for p in recorded(pids) if sleeper_alive(p)] == []


def test_a_crash_leaves_no_process_behind(pool: WorkerPool, tmp_path: Path) -> None:
    model, pids = write_model(tmp_path, "crash", crash=True)
    result = run_one(pool, model, Limits(timeout_s=600, memory_mb=8192))
    assert [d.code for d in result.diagnostics] == ["worker-crash"]
    assert [p for p in recorded(pids) if sleeper_alive(p)] == []


def test_a_cancel_leaves_no_process_behind(pool: WorkerPool, tmp_path: Path) -> None:
    model, pids = write_model(tmp_path, "cancelled", BODIES["hang"])
    request = ExportRequest(id=7, path=str(model), root=str(tmp_path), limits=Limits(timeout_s=600, memory_mb=8192))
    out: list[FileResult] = []
    thread = threading.Thread(target=lambda: out.extend(pool.run([request])))
    thread.start()
    sleepers = recorded(pids)  # both running: the job is in its endless forward now or soon
    pool.cancel(7)
    thread.join(timeout=120)
    assert not thread.is_alive() and out == []
    assert [p for p in sleepers if sleeper_alive(p)] == []


def test_closing_the_pool_leaves_no_process_behind(tmp_path: Path) -> None:
    model, pids = write_model(tmp_path, "closed", BODIES["hang"])
    stop = threading.Event()
    with WorkerPool(1) as pool:
        pool.submit(ExportRequest(id=1, path=str(model), root=str(tmp_path), limits=Limits(timeout_s=600, memory_mb=8192)))
        thread = threading.Thread(target=lambda: list(pool.serve(stop)))
        thread.start()
        sleepers = recorded(pids)
        assert all(sleeper_alive(p) for p in sleepers)  # still running while the job runs
        stop.set()
        pool.wake()
        thread.join(timeout=60)
    # Left the ``with``: the pool is closed and its worker gone.
    assert [p for p in sleepers if sleeper_alive(p)] == []


def test_a_worker_stopped_with_sigterm_leaves_no_process_behind(tmp_path: Path) -> None:
    # How the pool stops a worker it gives up on (and how a system stops one): SIGTERM.
    model, pids = write_model(tmp_path, "terminated", BODIES["hang"])
    request = ExportRequest(id=1, path=str(model), root=str(tmp_path), limits=Limits(timeout_s=600, memory_mb=8192))
    with WorkerPool(1) as pool:
        pool.wait_ready()
        (worker,) = pool.worker_pids()
        out: list[FileResult] = []
        thread = threading.Thread(target=lambda: out.extend(pool.run([request])))
        thread.start()
        sleepers = recorded(pids)
        os.kill(worker, signal.SIGTERM)
        thread.join(timeout=120)
        # The worker is gone, so the pool answered for it; it ended the job first.
        assert [d.code for d in out[0].diagnostics] == ["worker-crash"]
        assert [p for p in sleepers if sleeper_alive(p)] == []
