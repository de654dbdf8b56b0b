"""The worker starts with the garbage collector off (importing torch and the warm-up
export run ~0.5-0.9 s faster without full collections) and turns it back on once its
heap is frozen: a model runs with the collector on, torch's objects out of its reach."""

from __future__ import annotations

from pathlib import Path

from exportlens.core.isolation.pool import WorkerPool
from tests.core.isolation.models import add_model, request_for

MODEL = add_model(
    '''import gc

import torch

# Seen by the model: the collector on, and the worker's heap frozen (not walked by it).
if not gc.isenabled():
    raise RuntimeError("the garbage collector is off in the job")
if gc.get_freeze_count() < 100_000:
    raise RuntimeError(f"only {gc.get_freeze_count()} objects frozen")'''
)


def test_a_job_runs_with_the_collector_on_and_the_heap_frozen(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    with WorkerPool(1) as pool:
        pool.wait_ready()
        (result,) = list(pool.run([request_for(model, 1)]))
    assert [d.message for d in result.diagnostics] == []
    assert [t.status for t in result.targets] == ["ok"]
