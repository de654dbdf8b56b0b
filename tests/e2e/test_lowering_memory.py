"""What an ExecuTorch deployment needs in memory, and a lowering that dies, through the
real CLI (``check --lower executorch``):

- pytorch/examples' super-resolution net, its class in its own module and declared in
  another with the dynamic shapes its users want (batch up to 32, 8 to 1024 pixels a
  side): its export is ``ok``; its program would need 9 GB, more than the job's cap,
  so it is not run and a ``lowering/executorch-memory`` warning says so at the
  ``batch`` Dim, naming every Dim that decides it and its maximum -- never an
  ``out-of-memory``;
- a lowering killed by the memory cap, and one that crashes (each model runs its
  ``forward`` eagerly only when lowering compares with eager): the export stays
  ``ok`` with its signature, the lowering is an ``error`` that says what stopped it,
  at the line that was running;
- memory budgets: the project's fails a model over it (exit 1), a target's own wins;
- a static model's planned memory is ExecuTorch's own number for it.

One ``check`` run holds the dying models and the net (each lowering costs seconds)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import check_json

pytest.importorskip("executorch", reason="the exportlens[executorch] extra is not installed")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lowering" / "memory"


def _project(tmp_path: Path, pyproject: str = "") -> Path:
    project = tmp_path / "project"
    shutil.copytree(FIXTURES, project)
    (project / "pyproject.toml").write_text(pyproject)
    return project


def _line(path: Path, text: str) -> int:
    [n] = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return n


def _file(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in doc["files"] if f["path"] == name)


def _target(entry: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in entry["targets"] if t["name"] == name)


def _diagnostics(entry: dict[str, Any], target: str) -> list[dict[str, Any]]:
    return [d for d in entry["diagnostics"] if d["target"] == target]


@pytest.fixture(scope="module")
def dying(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, dict[str, Any]]:
    project = _project(tmp_path_factory.mktemp("memory"))
    code, doc = check_json("dies.py", "upscale/targets.py", cwd=project, extra=("--lower", "executorch", "--no-cache", "--memory-mb", "2048"))
    return project, code, doc


def test_the_net_with_dynamic_shapes_exports_and_says_what_memory_its_dims_need(dying: tuple[Path, int, dict[str, Any]]) -> None:
    project, _, doc = dying
    entry = _file(doc, "upscale/targets.py")
    target = _target(entry, "upscaler")
    assert target["status"] == "ok" and target["signature"]["inputs"], target
    lowering = target["lowering"]["executorch"]
    assert lowering["status"] == "not-run", lowering
    # ExecuTorch's plan holds every value at the Dims' maxima: input and output at batch 32, 1024 x 1024.
    assert lowering["planned_memory_bytes"] > 1 << 30, lowering
    assert lowering["workspace_bytes"] == 32 * 64 * 1024 * 1024 * 4, lowering  # conv1's output, float32
    assert lowering["memory_dims"] == "`batch` up to 32, `height` up to 1024, `width` up to 1024", lowering
    assert lowering["run_peak_bytes"] is None and "memory cap of 2048 MB" in lowering["skipped"], lowering

    found = _diagnostics(entry, "upscaler")
    assert not [d for d in found if d["code"] in ("out-of-memory", "worker-crash", "timeout")], found
    [warning] = [d for d in found if d["code"] == "lowering/executorch-memory"]
    targets = project / "upscale" / "targets.py"
    assert warning["severity"] == "warning" and warning["line"] == _line(targets, 'batch = Dim("batch"'), warning
    assert "needs at least 9.1 GB to run" in warning["message"] and "memory plan is 1.1 GB" in warning["message"], warning
    assert "[32, 64, 1024, 1024] float32 (net.py:" in warning["message"], warning
    assert [(r["line"], r["message"]) for r in warning["related"]] == [
        (_line(targets, 'height = Dim("height"'), "`height` is declared here"),
        (_line(targets, 'width = Dim("width"'), "`width` is declared here"),
    ], warning


@pytest.mark.parametrize(
    ("name", "line", "cause"),
    [
        ("crashes", "ctypes.string_at(0)", "ended the export process with SIGSEGV"),
        ("hogs", "self.hog = torch.ones(1 << 30)", "went over the job's memory cap (2048 MB resident"),
    ],
)
def test_a_lowering_that_dies_keeps_the_export(dying: tuple[Path, int, dict[str, Any]], name: str, line: str, cause: str) -> None:
    project, code, doc = dying
    assert code == 1
    entry = _file(doc, "dies.py")
    target = _target(entry, name)
    assert target["status"] == "ok", target
    assert [s["kind"] for s in target["signature"]["inputs"]] == ["PARAMETER", "PARAMETER", "USER_INPUT"], target
    lowering = target["lowering"]["executorch"]
    assert lowering["status"] == "error" and cause in lowering["errors"][-1], lowering
    # It died after the program was built: what lowering found before stands.
    assert lowering["delegated_ops"] == lowering["total_ops"] == 2 and lowering["pte_bytes"], lowering
    found = _diagnostics(entry, name)
    assert [(d["code"], d["line"]) for d in found] == [("lowering/executorch-error", _line(project / "dies.py", line))], found
    message = found[0]["message"]
    assert cause in message and "while running the model eagerly on the example inputs" in message and "The export itself is fine" in message, message
    statuses = [t["status"] for f in doc["files"] for t in f["targets"]]
    assert statuses == ["ok", "ok", "ok"], doc


def test_a_memory_budget_fails_a_program_over_it_and_a_targets_own_wins(tmp_path: Path) -> None:
    project = _project(tmp_path, '[tool.exportlens]\nmemory_budget = "1 KB"\n')
    code, doc = check_json("budgets.py", cwd=project, extra=("--lower", "executorch", "--no-cache"))
    assert code == 1
    entry = _file(doc, "budgets.py")
    over = _target(entry, "Project")["lowering"]["executorch"]
    within = _target(entry, "Own")["lowering"]["executorch"]
    assert over["status"] == within["status"] == "ok", (over, within)
    assert over["budget_bytes"] == 1024 and within["budget_bytes"] == 1 << 20, (over, within)
    [error] = [d for d in entry["diagnostics"] if d["code"] == "lowering/executorch-over-budget"]
    assert error["target"] == "Project" and error["severity"] == "error" and error["line"] == _line(project / "budgets.py", "class Project"), error
    assert "over its memory budget of 1.0 KB (`memory_budget`)" in error["message"], error

    # The same project with a budget the program fits passes; the flag wins over pyproject.
    code, doc = check_json("budgets.py", cwd=project, extra=("--lower", "executorch", "--no-cache", "--memory-budget", "64 MB"))
    assert code == 0, doc
    assert not [d for d in _file(doc, "budgets.py")["diagnostics"] if d["code"] == "lowering/executorch-over-budget"]


_EXECUTORCH_PLAN = textwrap.dedent(
    """
    import sys, warnings
    warnings.filterwarnings("ignore")
    sys.path.insert(0, sys.argv[1])
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from budgets import Small
    ep = torch.export.export(Small().eval(), (torch.randn(4, 32),))
    program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
    print(sum(program.executorch_program.execution_plan[0].non_const_buffer_sizes))
    """
)


def test_a_static_models_plan_is_executorchs_own(tmp_path: Path) -> None:
    project = _project(tmp_path)
    code, doc = check_json("budgets.py", cwd=project, extra=("--lower", "executorch", "--no-cache"))
    assert code == 0, doc
    lowering = _target(_file(doc, "budgets.py"), "Project")["lowering"]["executorch"]
    own = subprocess.run([sys.executable, "-c", _EXECUTORCH_PLAN, str(project)], capture_output=True, text=True, check=True, timeout=600)
    assert lowering["planned_memory_bytes"] == int(own.stdout.split()[-1]), (lowering, own.stdout)
    assert lowering["memory_dims"] is None and lowering["run_peak_bytes"] > 0, lowering


def test_an_onnx_lowering_that_dies_keeps_the_export_too(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="the exportlens[onnx] extra is not installed")
    project = _project(tmp_path)
    code, doc = check_json("dies.py", cwd=project, extra=("--lower", "onnx", "--no-cache", "--memory-mb", "2048"))
    assert code == 1
    entry = _file(doc, "dies.py")
    dies = project / "dies.py"
    for name, line, cause in (("crashes", "ctypes.string_at(0)", "ended the export process with SIGSEGV"), ("hogs", "self.hog = torch.ones(1 << 30)", "went over the job's memory cap")):
        target = _target(entry, name)
        assert target["status"] == "ok" and target["signature"]["outputs"], target
        assert target["lowering"]["status"] == "error" and cause in target["lowering"]["errors"][-1], target["lowering"]
        found = [(d["code"], d["line"]) for d in _diagnostics(entry, name)]
        assert found == [("lowering/onnx-error", _line(dies, line))], found
        [message] = [d["message"] for d in _diagnostics(entry, name)]
        assert message.startswith(f"lowering to ONNX {cause}") and "while running the model eagerly on the example inputs, to compare with onnxruntime" in message, message
