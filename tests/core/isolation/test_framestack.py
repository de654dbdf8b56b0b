"""Calls whose frames never cross an edge of the interpreter's frame stack
(``core/isolation/speedups/framestack.py``): on the CPythons that free a chunk as soon as its
base frame returns (gh-142183), a call tree going up and down across a chunk's edge
maps and unmaps the chunk at each crossing, one page fault each; under
``framestack.call`` it does not at any depth, and every job, forked or spawned,
runs the model's code that way. On the CPythons that keep a freed chunk it does not
happen at all, and ``call`` is an ordinary call there."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from exportlens import about
from exportlens.core.isolation.pool import WorkerPool
from exportlens.core.isolation.speedups import framestack
from exportlens.core.isolation.startmethod import StartMethod
from tests.core.isolation.models import add_model, request_for

pytestmark = pytest.mark.needs_speedup("frame stack")  # what it checks is that speed-up's (tests/conftest.py)

REPS = 200
DEPTHS = 400  # frames of ~100 bytes: more than one 16 kB chunk of the frame stack

# Run here and inside a model file: at each depth below its caller, a call tree that
# goes REPS times down and up by a few frames; the page faults that cost.
SCAN = f'''
import resource

_WHO = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)


def _leaf(n):
    return _leaf(n - 1) if n else 0


def _down(n):
    if n:
        return _down(n - 1)
    before = resource.getrusage(_WHO).ru_minflt
    for _ in range({REPS}):
        _leaf(8)
    return resource.getrusage(_WHO).ru_minflt - before


def faults_by_depth():
    return [_down(depth) for depth in range({DEPTHS})]
'''


def _scan() -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(SCAN, "scan.py", "exec"), namespace)
    return namespace["faults_by_depth"]


def test_a_call_tree_across_a_chunk_edge_faults_at_each_crossing_unless_under_framestack() -> None:
    faults_by_depth = _scan()
    plain = faults_by_depth()
    thrashes = max(plain) >= REPS  # some depth straddles an edge: a fault each time down
    assert thrashes == framestack.thrashes_by_version(sys.version_info[:3]), (sys.version, plain)
    assert framestack.probe() == thrashes
    assert framestack.state().on == thrashes, framestack.state()
    roomy = framestack.call(faults_by_depth)
    assert max(roomy) < REPS // 10, roomy


@pytest.mark.parametrize(
    ("version", "thrashes"),
    [
        ((3, 10, 13), False),
        ((3, 11, 7), True),
        ((3, 12, 12), True),
        ((3, 13, 0), True),
        ((3, 13, 12), True),
        ((3, 13, 13), False),
        ((3, 14, 3), True),
        ((3, 14, 4), False),
        ((3, 15, 0), False),
    ],
)
def test_the_versions_that_thrash_are_the_ones_before_the_chunk_cache(version: tuple[int, int, int], thrashes: bool) -> None:
    assert framestack.thrashes_by_version(version) is thrashes
    unmeasured = framestack.decide(version, None)
    assert unmeasured.on is thrashes
    assert ("on: " if thrashes else "off: ") in unmeasured.why


def test_what_the_probe_measured_decides_over_the_version() -> None:
    measured = framestack.decide((3, 14, 4), True)
    assert measured.on is True
    assert measured.why.startswith("on: Python 3.14.4 maps and unmaps a frame-stack chunk at each crossing of its edge (measured)"), measured
    assert framestack.decide((3, 12, 1), False).on is False
    assert framestack.decide((3, 10, 13), True).on is False  # no chunks before 3.11


def test_off_is_an_ordinary_call_that_crosses_edges_as_the_interpreter_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(framestack, "state", lambda: framestack.State(False, "off: forced by the test"))
    faults = framestack.call(_scan())
    assert (max(faults) >= REPS) == framestack.thrashes_by_version(sys.version_info[:3]), faults


def test_framestack_passes_arguments_and_results_and_raises_what_the_call_raises() -> None:
    assert framestack.call(dict, [("a", 1)], b=2) == {"a": 1, "b": 2}
    with pytest.raises(ZeroDivisionError):
        framestack.call(divmod, 1, 0)


THRASHES = add_model(
    "import torch\n"
    + SCAN
    + f"""
worst = max(faults_by_depth())
if worst >= {REPS}:
    raise RuntimeError(f"the frame stack's chunks were mapped and unmapped {{worst}} times at one depth")
"""
)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_job_runs_the_model_without_mapping_frame_stack_chunks_over_and_over(tmp_path: Path, method: str) -> None:
    """Whatever depth the worker's own frames reached when it forked the job (or the
    spawned interpreter its own), the model's code has the chunk's room below it."""
    path = tmp_path / "model.py"
    path.write_text(THRASHES)
    with WorkerPool(1, start_method=StartMethod(method, "test")) as pool:
        (result,) = pool.run([request_for(path)])
    assert [t.status for t in result.targets] == ["ok"], result.diagnostics


def test_exportlens_version_says_whether_the_frame_stack_speed_up_is_on_and_why() -> None:
    [row] = [line for line in about.report().splitlines() if line.startswith("frame stack")]
    state = framestack.state()
    assert row.split(None, 2)[2] == state.why
    assert state.why.startswith("on: " if state.on else "off: ")
    assert f"Python {sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]}" in state.why
