"""Lowering to ONNX through the real CLI on real models (``check --lower onnx``): a
model that lowers with a dynamic dim and matches, a custom op with no translation
reported at each line that calls it, a translation that computes something else
reported at the ``return``, the missing extra, ``--save-onnx``, pyproject's
``lower`` and the cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lowering"


def _project(tmp_path: Path, *names: str, pyproject: str = "") -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(pyproject)
    for name in names:
        shutil.copy(FIXTURES / name, project / name)
    return project


def _check(project: Path, *extra: str, env: dict[str, str | None] | None = None) -> tuple[int, dict[str, Any]]:
    proc = run_cli("check", "--format", "json", *extra, ".", cwd=project, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _file(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in doc["files"] if f["path"] == name)


def _codes(entry: dict[str, Any]) -> list[tuple[str, int]]:
    return [(d["code"], d["line"]) for d in entry["diagnostics"]]


@pytest.fixture(scope="module")
def lowered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, dict[str, Any]]:
    """One run over the three models, saving the ONNX models (each run costs seconds)."""
    tmp = tmp_path_factory.mktemp("lowering")
    project = _project(tmp, "clean.py", "untranslatable.py", "mismatch.py")
    code, doc = _check(project, "--lower", "onnx", "--save-onnx", "onnx-out", "--no-cache")
    return project, code, doc


def test_a_clean_model_lowers_and_matches(lowered: tuple[Path, int, dict[str, Any]]) -> None:
    _, _, doc = lowered
    clean = _file(doc, "clean.py")
    assert clean["diagnostics"] == []
    lowering = clean["targets"][0]["lowering"]
    assert lowering["format"] == "onnx" and lowering["status"] == "ok", lowering
    assert isinstance(lowering["opset"], int) and lowering["opset"] >= 18
    assert lowering["nodes"] > 0 and lowering["lower_ms"] > 0
    [out] = lowering["outputs"]
    assert out["name"] == "sum_1" and out["dtype"] == "float32" and out["match"] is True
    assert (out["atol"], out["rtol"]) == (1e-5, 1e-4)
    assert lowering["max_abs_error"] is not None and lowering["max_abs_error"] <= 1e-5
    assert "onnxruntime" in lowering["versions"]


def test_the_saved_model_keeps_the_dynamic_dim_and_runs_at_another_size(lowered: tuple[Path, int, dict[str, Any]]) -> None:
    import numpy as np
    import onnx
    import onnxruntime

    project, _, _ = lowered
    saved = sorted(p.name for p in (project / "onnx-out").iterdir())
    # Every target that converted, the mismatching one too (it is the one to inspect).
    assert saved == ["clean.Net.onnx", "mismatch.Scaled.onnx"], saved
    model = onnx.load(str(project / "onnx-out" / "clean.Net.onnx"))
    onnx.checker.check_model(model)
    [x] = model.graph.input
    batch = x.type.tensor_type.shape.dim[0]
    assert batch.dim_param and not batch.HasField("dim_value"), batch  # symbolic, not 5
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    [y] = session.run(None, {x.name: np.ones((9, 4), dtype=np.float32)})
    assert y.shape == (9,)


def test_an_op_with_no_translation_is_reported_at_each_line_that_calls_it(lowered: tuple[Path, int, dict[str, Any]]) -> None:
    _, code, doc = lowered
    entry = _file(doc, "untranslatable.py")
    assert _codes(entry) == [("lowering/onnx-unsupported", 18), ("lowering/onnx-unsupported", 19)]
    for d in entry["diagnostics"]:
        assert d["severity"] == "error" and d["target"] == "Weird"
        assert "`exportlens_test::weird`" in d["message"]
        assert "custom_translation_table = {torch.ops.exportlens_test.weird.default:" in d["message"]
    [target] = entry["targets"]
    assert target["status"] == "ok" and target["lowering"]["status"] == "unsupported"
    assert code == 1


def test_a_translation_that_computes_otherwise_is_a_mismatch_at_the_return(lowered: tuple[Path, int, dict[str, Any]]) -> None:
    _, _, doc = lowered
    entry = _file(doc, "mismatch.py")
    assert _codes(entry) == [("lowering/onnx-mismatch", 26)]
    message = entry["diagnostics"][0]["message"]
    # x is ones: eager 2, ONNX 2.5; the other output (cos) matches and is not named.
    assert "`scale` (float32): max abs error 0.5, max rel error 0.25" in message, message
    assert "`cos`" not in message
    lowering = entry["targets"][0]["lowering"]
    assert lowering["status"] == "mismatch"
    assert [(o["name"], o["match"]) for o in lowering["outputs"]] == [("scale", False), ("cos", True)]
    assert lowering["max_abs_error"] == 0.5


def test_text_output_says_what_lowering_found(tmp_path: Path) -> None:
    project = _project(tmp_path, "clean.py")
    proc = run_cli("show", "clean.py", "--no-cache", cwd=project)
    assert "lowers to ONNX" not in proc.stdout  # opt-in: nothing without the setting
    (project / "pyproject.toml").write_text('[tool.exportlens]\nlower = ["onnx"]\n')
    proc = run_cli("show", "clean.py", "--no-cache", cwd=project)
    assert proc.returncode == 0, proc.stderr
    header = next(line for line in proc.stdout.splitlines() if line.startswith("Net (clean.py:"))
    assert "; lowers to ONNX (opset " in header and "outputs match (max error " in header, header


def test_without_the_extra_one_diagnostic_gives_the_pip_command(tmp_path: Path) -> None:
    # A real failing import: a shadowing `onnxscript` package that raises as a
    # missing one does, first on the worker's path.
    shadow = tmp_path / "shadow" / "onnxscript"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'onnxscript'\", name='onnxscript')\n")
    project = _project(tmp_path, "two_targets.py")
    code, doc = _check(project, "--lower", "onnx", "--no-cache", env={"PYTHONPATH": str(shadow.parent)})
    entry = _file(doc, "two_targets.py")
    assert _codes(entry) == [("lowering/onnx-error", 8)], entry["diagnostics"]
    message = entry["diagnostics"][0]["message"]
    assert "`onnxscript`" in message and "pip install 'exportlens[onnx]'" in message
    assert [t["lowering"]["status"] for t in entry["targets"]] == ["unavailable", "unavailable"]
    assert code == 1


def test_pyproject_lower_turns_it_on_and_the_flag_off(tmp_path: Path) -> None:
    project = _project(tmp_path, "untranslatable.py", pyproject='[tool.exportlens]\nlower = ["onnx"]\n')
    cache = ["--cache-dir", str(tmp_path / "cache")]
    code, doc = _check(project, *cache)
    assert [c for c, _ in _codes(_file(doc, "untranslatable.py"))] == ["lowering/onnx-unsupported"] * 2
    # The same file from the cache, with its lowering.
    proc = run_cli("check", "--format", "json", *cache, ".", cwd=project)
    again = json.loads(proc.stdout)
    assert _file(doc, "untranslatable.py")["from"] == "run" and _file(again, "untranslatable.py")["from"] == "cache"
    assert {**_file(again, "untranslatable.py"), "from": "run"} == _file(doc, "untranslatable.py")
    # --lower none overrides pyproject: a different key, no stale lowering from the cache.
    code, off = _check(project, "--lower", "none", *cache)
    entry = _file(off, "untranslatable.py")
    assert entry["diagnostics"] == [] and "lowering" not in entry["targets"][0] and code == 0


def test_a_bad_lower_value(tmp_path: Path) -> None:
    proc = run_cli("check", "--lower", "tflite", str(tmp_path))
    assert proc.returncode == 2 and "argument --lower" in proc.stderr
    project = _project(tmp_path, "two_targets.py", pyproject='[tool.exportlens]\nlower = ["onnxx"]\n')
    proc = run_cli("check", "--format", "json", "--no-cache", ".", cwd=project)
    assert "[tool.exportlens] lower = ['onnxx'] is not a list of formats ('onnx', 'executorch'); it is ignored" in proc.stderr
    assert all("lowering" not in t for t in _file(json.loads(proc.stdout), "two_targets.py")["targets"])
