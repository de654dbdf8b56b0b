"""``exportlens check`` over the bundled examples, through the real command:
every diagnostic at its line, the JSON contract, the text report, exit codes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import EXAMPLES, ROOT, check_json, run_cli


@pytest.fixture(scope="module")
def report() -> tuple[int, dict[str, Any]]:
    return check_json("examples")


def _by_path(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["path"]: f for f in doc["files"]}


# (file, code, line, target) for every diagnostic the examples must produce.
EXPECTED = {
    ("examples/bad_encoding.py", "syntax-error", 5, None),
    ("examples/broken_syntax.py", "syntax-error", 7, None),
    ("examples/import_error.py", "import-error", 5, None),
    ("examples/banned_mutations.py", "banned-mutation/input-metadata", 12, "TransposeInPlace"),
    ("examples/banned_mutations.py", "banned-mutation/parameter", 23, "TrainableUpdate"),
    ("examples/banned_mutations.py", "banned-mutation/tensor-attribute", 34, "RunningMean"),
    ("examples/counter.py", "mutation/buffer", 14, "Counter"),
    ("examples/input_mutation.py", "mutation/user-input", 14, "Normalizer"),
    ("examples/input_mutation.py", "mutation/parameter", 15, "Normalizer"),
    ("examples/data_dependent.py", "data-dependent", 10, "Gate"),
    ("examples/data_dependent.py", "data-dependent", 12, "Gate"),
    ("examples/dynamic_shapes.py", "constraint-violation", 7, "Reshaper"),
    ("examples/errors.py", "eager-error", 13, "ShapeMismatch"),
    ("examples/errors.py", "unsupported-type", 24, "ReturnsObject"),
    ("examples/errors.py", "target-error", 28, "ListArgs"),
    ("examples/strict_graph_break.py", "unsupported", 9, "Logged"),
    ("examples/faults/hang.py", "timeout", 9, "Spin"),
    ("examples/faults/memory_hog.py", "out-of-memory", 11, "Hog"),
    ("examples/faults/segfault.py", "worker-crash", 11, "Crash"),
}


def test_every_expected_diagnostic_at_its_line(report: tuple[int, dict[str, Any]]) -> None:
    code, doc = report
    assert code == 1
    found = {(f["path"], d["code"], d["line"], d["target"]) for f in doc["files"] for d in f["diagnostics"]}
    assert found == EXPECTED


def test_json_document_shape(report: tuple[int, dict[str, Any]]) -> None:
    _, doc = report
    assert doc["version"] == 1
    severities = {"error", "warning", "information", "hint"}
    for f in doc["files"]:
        assert set(f) == {"path", "from", "diagnostics", "targets"}
        assert f["from"] in ("run", "cache", "store")
        for d in f["diagnostics"]:
            assert {"code", "severity", "line", "column", "end_line", "end_column", "message", "target"} <= set(d)
            assert d["severity"] in severities and d["message"]
            assert d["line"] >= 1 and d["column"] >= 1
            assert (d["end_line"], d["end_column"]) > (d["line"], d["column"])
        for t in f["targets"]:
            assert t["status"] in ("ok", "error")
            assert ("signature" in t) == (t["status"] == "ok")


def test_counter_matches_the_contract_example(report: tuple[int, dict[str, Any]]) -> None:
    counter = _by_path(report[1])["examples/counter.py"]
    [target] = counter["targets"]
    assert (target["name"], target["line"], target["status"]) == ("Counter", 7, "ok")
    assert target["export_ms"] > 0
    sig = target["signature"]
    assert sig["inputs"][0] == {
        "kind": "BUFFER", "name": "b_steps", "target": "steps", "persistent": True,
        "arg": "tensor", "dtype": "float32", "shape": [1], "device": "cpu", "line": 10,
    }
    assert sig["inputs"][1]["persistent"] is False
    assert sig["outputs"][0] == {
        "kind": "BUFFER_MUTATION", "name": "add", "target": "steps", "arg": "tensor",
        "dtype": "float32", "shape": [1], "device": "cpu", "line": 14,
    }
    [diag] = counter["diagnostics"]
    assert (diag["code"], diag["severity"], diag["line"], diag["column"], diag["end_line"], diag["end_column"]) == (
        "mutation/buffer", "information", 14, 9, 14, 27,
    )


def test_dynamic_dims_and_ranges(report: tuple[int, dict[str, Any]]) -> None:
    [target] = _by_path(report[1])["examples/dynamic_ok.py"]["targets"]
    x = next(s for s in target["signature"]["inputs"] if s["kind"] == "USER_INPUT")
    batch, seq, width = x["shape"]
    assert isinstance(batch, str) and isinstance(seq, str) and width == 16
    assert target["signature"]["ranges"][seq] == [2, 512]
    assert target["signature"]["ranges"][batch][1] == 32


def test_constraint_violation_carries_torchs_fix_and_the_specialising_line(report: tuple[int, dict[str, Any]]) -> None:
    [diag] = _by_path(report[1])["examples/dynamic_shapes.py"]["diagnostics"]
    assert "Suggested fixes" in diag["message"] and "batch = 4" in diag["message"]
    assert any(r["line"] == 12 for r in diag["related"])


def test_multiple_targets_and_pyproject_target(report: tuple[int, dict[str, Any]]) -> None:
    files = _by_path(report[1])
    assert [(t["name"], t["line"], t["status"]) for t in files["examples/multi_targets.py"]["targets"]] == [
        ("encoder", 11, "ok"), ("scaler", 32, "ok"),
    ]
    scaler = files["examples/multi_targets.py"]["targets"][1]["signature"]
    assert [(s["kind"], s["name"], s["line"]) for s in scaler["inputs"]] == [("USER_INPUT", "x", 26), ("USER_INPUT", "bias", 26)]
    [target] = files["examples/pyproject_target/pkg/models.py"]["targets"]
    assert (target["name"], target["status"]) == ("make_classifier", "ok")


def test_a_crashing_file_does_not_stop_the_others(report: tuple[int, dict[str, Any]]) -> None:
    statuses = {t["name"]: t["status"] for f in report[1]["files"] for t in f["targets"]}
    assert statuses["Crash"] == "error" and statuses["TinyMLP"] == "ok" and statuses["Counter"] == "ok"


def test_model_output_never_reaches_stdout(tmp_path: Any) -> None:
    (tmp_path / "chatty.py").write_text(
        "import sys, torch\nprint('hello from import')\n"
        "class M(torch.nn.Module):\n    def forward(self, x):\n        print('hello from forward'); print('err', file=sys.stderr)\n        return x + 1\n"
        "model = M()\nexample_args = (torch.randn(2),)\n"
    )
    code, doc = check_json(str(tmp_path / "chatty.py"))
    assert code == 0 and doc["files"][0]["targets"][0]["status"] == "ok"


def test_text_report_reads_like_a_linter() -> None:
    proc = run_cli("check", "examples/counter.py", "examples/data_dependent.py")
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert "examples/counter.py:14:9: information[mutation/buffer]: the program mutates buffer `steps`: it becomes a `BUFFER_MUTATION` output `add`, copied back after each call [Counter]" in lines
    assert any(line.startswith("examples/data_dependent.py:10:9: error[data-dependent]: `if x.sum() > 0:`") for line in lines)
    assert "Counter (examples/counter.py:7): ok" in proc.stdout
    assert any("BUFFER_MUTATION" in line and "steps" in line and ":14" in line for line in lines)
    assert lines[-1].startswith("Checked 2 files, 2 targets (1 exported, 1 failed): 2 errors, 1 information")


def test_exit_codes(tmp_path: Any) -> None:
    assert run_cli("check", str(EXAMPLES / "clean.py")).returncode == 0
    assert run_cli("check", str(EXAMPLES / "import_error.py")).returncode == 1
    missing = run_cli("check", str(tmp_path / "nope.py"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    assert run_cli("check", "--format", "yaml", "examples").returncode == 2
    # No PATH: the project of the current folder (here one without models), not a usage error.
    (tmp_path / "pyproject.toml").write_text("")
    project = run_cli("check", cwd=tmp_path)
    assert project.returncode == 0 and project.stdout.startswith("Checked 0 files"), project.stderr


def test_show_prints_the_signature_table() -> None:
    proc = run_cli("show", str(EXAMPLES / "clean.py"))
    assert proc.returncode == 0
    assert "TinyMLP (examples/clean.py:7): ok" in proc.stdout
    assert "p_fc1_weight" in proc.stdout and "fc1.weight" in proc.stdout and "float32[16, 8]" in proc.stdout


def test_front_end_modules_do_not_import_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, exportlens, exportlens.target, exportlens.cli, exportlens.report, "
        "exportlens.core.isolation.pool, exportlens.core.export.analyze, exportlens.core.pipeline, exportlens.core.project.files, exportlens.core.source.sourcemap, exportlens.server\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_a_malformed_pyproject_declaration_is_reported(tmp_path: Any) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.exportlens]\ntargets = "models.py:make"\n')
    (tmp_path / "models.py").write_text(
        "import torch\nmodel = torch.nn.Identity()\nexample_args = (torch.randn(2),)\n"
    )
    code, doc = check_json(str(tmp_path / "models.py"))
    assert code == 1
    models, pyproject = doc["files"]  # the problem is pyproject.toml's, located there (issue 22)
    assert models["diagnostics"] == [] and pyproject["path"].endswith("pyproject.toml")
    [diag] = pyproject["diagnostics"]
    assert diag["code"] == "target-error" and "must be a list" in diag["message"] and diag["line"] == 2
    assert models["targets"][0]["status"] == "ok"  # the globals target still exports
