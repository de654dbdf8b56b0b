"""A worker interpreter that cannot be executed: the pool says so once, in words, and
``check`` exits 2 with a message instead of a traceback; the server's loop
(``serve``) answers every request at once instead of raising."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from exportlens.core.isolation.pool import PoolEvent, WorkerError, WorkerPool
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.model.results import FileResult
from tests.core.isolation.models import add_model, request_for

MODEL = add_model()


@pytest.fixture
def not_executable(tmp_path: Path) -> Path:
    """A file named like an interpreter without any execute bit (root cannot run it either)."""
    path = tmp_path / "python3"
    path.write_text("#!/bin/sh\n")
    path.chmod(0o644)
    return path


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return path


def request(model: Path, id: int = 1) -> ExportRequest:
    return request_for(model, id, Limits(timeout_s=600, memory_mb=8192))


def test_an_interpreter_that_cannot_run_is_reported_once(not_executable: Path, model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(not_executable))
    events: list[PoolEvent] = []
    with WorkerPool(2, on_event=events.append) as pool:
        with pytest.raises(WorkerError, match="Permission denied"):
            pool.wait_ready()
        # A batch (the CLI) cannot be checked at all: one error, not one per file.
        with pytest.raises(WorkerError, match=str(not_executable)):
            list(pool.run([request(model)]))
        # A stream (the server) gets an answer for every request, at once.
        stop = threading.Event()
        pool.submit(request(model, 2))
        pool.submit(request(model, 3))
        answers = pool.serve(stop)
        results: list[FileResult] = [next(answers)[1], next(answers)[1]]
        stop.set()
        assert [[d.code for d in r.diagnostics] for r in results] == [["worker-crash"], ["worker-crash"]]
    assert [(e.kind, str(not_executable) in e.detail) for e in events] == [("gave-up", True)]


def test_a_replacement_that_cannot_run_gives_up_instead_of_raising(not_executable: Path, model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The interpreter goes away while the pool runs (an upgrade, a deleted venv); then a worker dies.
    events: list[PoolEvent] = []
    with WorkerPool(1, on_event=events.append) as pool:
        pool.wait_ready()
        monkeypatch.setattr(sys, "executable", str(not_executable))
        (worker,) = pool.worker_pids()
        os.kill(worker, signal.SIGKILL)
        results: list[FileResult] = []
        with pytest.raises(WorkerError, match="Permission denied"):
            results.extend(pool.run([request(model, 1), request(model, 2)]))
    # The request the dead worker held failed with it; the other one found no worker.
    assert [[d.code for d in r.diagnostics] for r in results] == [["worker-crash"]]
    assert [e.kind for e in events] == ["ready", "gave-up"]


def test_check_says_why_and_exits_2(not_executable: Path, model: Path) -> None:
    # The CLI in a fresh process whose sys.executable names the file that cannot run.
    code = "import sys; sys.executable = sys.argv[1]; from exportlens.cli import run; sys.exit(run(sys.argv[2:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, str(not_executable), "check", "--no-cache", str(model)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{not_executable} cannot be run (Permission denied)" in done.stderr
    assert done.stdout == ""
