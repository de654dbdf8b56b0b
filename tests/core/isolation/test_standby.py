"""The worker forks the next job process ahead of its request and warms it up; the
request then runs in that already-warm process instead of a new fork."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from exportlens.core.isolation.pool import WorkerPool
from exportlens.core.model.request import Limits
from tests.core.isolation.models import add_model, request_for

pytestmark = pytest.mark.needs_speedup("standby job")  # what it checks is that speed-up's (tests/conftest.py)

MODEL = add_model(
    '''import os
import torch

with open(os.environ["PID_FILE"], "a") as f:
    f.write(f"{os.getpid()}\\n")'''
)


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _idle_standby(zygote: int, timeout: float = 120.0) -> int:
    """The zygote's one child once it has stopped using CPU (warm, waiting for a request)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        kids = _children(zygote)
        if len(kids) == 1:
            before = _cpu_ticks(kids[0])
            time.sleep(1.0)
            if kids == _children(zygote) and _cpu_ticks(kids[0]) == before:
                return kids[0]
        time.sleep(0.2)
    raise AssertionError("no idle standby job process appeared")


def test_the_request_runs_in_the_warm_standby(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    pid_file = tmp_path / "pids"
    monkeypatch.setenv("PID_FILE", str(pid_file))  # the workers inherit it
    with WorkerPool(1) as pool:
        pool.wait_ready()
        (zygote,) = pool.worker_pids()
        used = set()
        for i in range(2):
            standby = _idle_standby(zygote)
            assert standby not in used  # each request gets a fresh standby
            (result,) = list(pool.run([request_for(model, i, Limits(60))]))
            assert [t.status for t in result.targets] == ["ok"]
            ran_in = int(pid_file.read_text().split()[-1])
            assert ran_in == standby  # the process that was already waiting, not a new fork
            used.add(standby)
