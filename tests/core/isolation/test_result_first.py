"""A successful job's result goes out before the worker reaps the job (reaping waits
for the kernel to free the job's memory); the model's buffered output still makes
the result's tail; a job that left a process behind is cleaned up *before* its
result goes out. Read from the worker's trace (``EXPORTLENS_TRACE``): one timeline
of the worker and its jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from exportlens.core import trace
from exportlens.core.isolation.pool import WorkerPool
from tests.core.isolation.models import add_model, request_for

QUIET = add_model(
    '''import io
import os
import sys
import time

import torch


class SlowToFlush(io.TextIOWrapper):
    """A logging-style stream whose flush takes a while: only a flush before the
    result, not one on the way out, gets its text into the result."""

    def flush(self):
        time.sleep(0.5)
        super().flush()


sys.stdout = SlowToFlush(os.fdopen(os.dup(1), "wb"))
# Buffered, never flushed by the model.
print("a line the model printed", end="")
sys.stderr.write("and one on stderr")'''
)

SPAWNS = add_model(
    '''import subprocess
import torch

# Left running in a new session: the worker must kill it before the result goes out.
subprocess.Popen(["sleep", "1000"], start_new_session=True)'''
)


def _steps(path: Path, request_id: int) -> list[str]:
    """The worker's steps for one request, and its reaping of the job, in time order."""
    wanted = tuple(f"request {request_id} {step}" for step in ("result sent", "job ended", "job let go after its result"))
    return [what.split(": ", 1)[1] for _, _, what in trace.read(str(path)) if what.startswith("zygote: ") and what.endswith(wanted)]


def test_the_result_goes_out_before_the_job_is_reaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "trace"
    monkeypatch.setenv("EXPORTLENS_TRACE", str(log))  # the workers inherit it
    quiet, spawns = tmp_path / "quiet.py", tmp_path / "spawns.py"
    quiet.write_text(QUIET)
    spawns.write_text(SPAWNS)
    with WorkerPool(1) as pool:
        pool.wait_ready()
        (first,) = pool.run([request_for(quiet, 1)])
        (second,) = pool.run([request_for(spawns, 2)])
    assert [t.status for t in first.targets] == ["ok"]
    # The output the model never flushed is in the pipe before the result.
    assert "a line the model printed" in first.output_tail and "and one on stderr" in first.output_tail
    assert _steps(log, 1) == ["request 1 job ended", "request 1 result sent", "request 1 job let go after its result"]
    # A job that left a process: everything is killed and reaped first.
    assert [t.status for t in second.targets] == ["ok"]
    assert _steps(log, 2) == ["request 2 job ended", "request 2 result sent"]
