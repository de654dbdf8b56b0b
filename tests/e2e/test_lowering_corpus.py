"""Lowering models with the traits of public model code to both destinations through the
real CLI (``check --lower onnx,executorch``): nanoGPT's ``(logits, None)``, outputs of
every structure (a dict, a list, a tuple, ``None``, ints and SymInts), gpt-fast's
decode step with a static KV cache, a VAE's ``randn_like``, a DCGAN generator and a
dropout classifier left in training mode.

No internal error, every target still exported, every lowering status explained, and
the ``lowering`` JSON carries both destinations' records. Then the ``training-mode``
quick fix, applied as an editor would, is checked by exporting the edited file again.

One ``check`` run holds every model (lowering to ExecuTorch costs seconds per target)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import check_json, run_cli

pytest.importorskip("executorch", reason="the exportlens[executorch] extra is not installed")
pytest.importorskip("onnxruntime", reason="the exportlens[onnx] extra is not installed")

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "lowering" / "corpus"
MODELS = ("dcgan.py", "decode.py", "dropout.py", "nanogpt.py", "nested.py", "vae.py")


def line_of(name: str, text: str) -> int:
    [n] = [i for i, line in enumerate((CORPUS / name).read_text().splitlines(), 1) if text in line]
    return n


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    project = tmp_path_factory.mktemp("corpus")
    (project / "pyproject.toml").write_text("")
    for name in MODELS:
        shutil.copy(CORPUS / name, project / name)
    proc = run_cli("check", "--format", "json", "--lower", "onnx,executorch", "--no-cache", "--jobs", "2", "--timeout", "900", ".", cwd=project)
    assert proc.returncode in (0, 1), proc.stderr
    return project, json.loads(proc.stdout)


def _entry(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in doc["files"] if f["path"] == name)


def _lowering(doc: dict[str, Any], name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The file's one target's ONNX record and ExecuTorch record."""
    [target] = _entry(doc, name)["targets"]
    low = target["lowering"]
    return low, low["executorch"]


def _diagnostics(doc: dict[str, Any], name: str, code: str) -> list[dict[str, Any]]:
    return [d for d in _entry(doc, name)["diagnostics"] if d["code"] == code]


def test_no_internal_error_every_target_exported_and_both_records_there(checked: tuple[Path, dict[str, Any]]) -> None:
    _, doc = checked
    assert sorted(f["path"] for f in doc["files"]) == sorted(MODELS)
    for entry in doc["files"]:
        for d in entry["diagnostics"]:
            assert "please report" not in d["message"] and "failed to analyse" not in d["message"], d
        [target] = entry["targets"]
        assert target["status"] == "ok", entry  # the export stands, whatever lowering found
        low = target["lowering"]
        assert low["format"] == "onnx" and low["executorch"]["format"] == "executorch", low
        for record in (low, low["executorch"]):
            if record["status"] == "mismatch":
                assert any(not o["match"] for o in record["outputs"]), record
            elif record["status"] != "ok":
                assert record["errors"], record  # every failure says what happened
            for o in record["outputs"]:
                assert o["compared"] in ("values", "shape", "constant"), o


def test_a_forward_returning_logits_and_none_lowers_to_both(checked: tuple[Path, dict[str, Any]]) -> None:
    _, doc = checked
    onnx, executorch = _lowering(doc, "nanogpt.py")
    assert (onnx["status"], executorch["status"]) == ("ok", "ok"), (onnx, executorch)
    for record, said in ((onnx, "onnxruntime's program has no output for it"), (executorch, "ExecuTorch returns None")):
        logits, none = record["outputs"]
        assert (logits["name"], logits["compared"], logits["match"]) == ("linear", "values", True)
        assert (none["name"], none["dtype"], none["compared"], none["match"]) == ("output 1", "NoneType", "constant", True)
        assert said in none["note"], none


def test_nested_outputs_with_ints_symints_and_none_lower_or_are_explained(checked: tuple[Path, dict[str, Any]]) -> None:
    _, doc = checked
    onnx, executorch = _lowering(doc, "nested.py")
    assert executorch["status"] == "ok", executorch
    # torch's flat order: a, b[0], b[1][0] (the batch, a SymInt), None, 7, then the batch again.
    kinds = [(o["name"], o["compared"], o["match"]) for o in executorch["outputs"]]
    assert kinds == [
        ("add", "values", True),
        ("mul_2", "values", True),
        ("sym_size_int_1", "values", True),
        ("output 3", "constant", True),
        ("output 4", "constant", True),
        ("sym_size_int_1", "values", True),
    ], kinds
    # torch.onnx cannot convert a returned number: said at the return, not as its AttributeError.
    assert onnx["status"] == "error", onnx
    [error] = _diagnostics(doc, "nested.py", "lowering/onnx-error")
    assert error["line"] == line_of("nested.py", "return {")
    assert error["message"].startswith("torch.onnx cannot convert a program that returns a constant number: output 4 (`7`)"), error
    assert onnx["errors"] == [error["message"]]


def test_a_decode_step_with_a_static_kv_cache_lowers_to_executorch(checked: tuple[Path, dict[str, Any]]) -> None:
    _, doc = checked
    onnx, executorch = _lowering(doc, "decode.py")
    assert executorch["status"] == "ok" and executorch["pte_bytes"] > 0, executorch
    assert onnx["status"] == "ok", onnx
    # Attention with dropout_p=0.0 draws nothing: its output is compared value by value.
    assert [o["compared"] for o in executorch["outputs"]] == ["values"]
    assert _diagnostics(doc, "decode.py", "lowering/executorch-error") == []


def test_a_random_draw_is_compared_by_shape_and_named_at_its_line(checked: tuple[Path, dict[str, Any]]) -> None:
    _, doc = checked
    onnx, executorch = _lowering(doc, "vae.py")
    # The line that draws, inside the helper `forward` calls (the program's node knows only the call).
    draw = line_of("vae.py", "        eps = torch.randn_like(std)")
    assert onnx["status"] == "ok", onnx
    sigmoid, mu, logvar = onnx["outputs"]
    assert (sigmoid["name"], sigmoid["compared"], sigmoid["match"]) == ("sigmoid", "shape", True)
    assert f"depends on random numbers (`aten::randn_like` at vae.py:{draw})" in sigmoid["note"], sigmoid
    assert "only its shape and dtype were compared" in sigmoid["note"]
    assert [(o["compared"], o["match"]) for o in (mu, logvar)] == [("values", True), ("values", True)]
    assert _diagnostics(doc, "vae.py", "lowering/onnx-mismatch") == []
    # ExecuTorch refuses the op: said at the line, with what to do.
    assert executorch["status"] == "error" and executorch["errors"], executorch
    [refused] = _diagnostics(doc, "vae.py", "lowering/executorch-error")
    assert refused["line"] == draw
    assert "`aten::randn_like` draws random numbers, and ExecuTorch's edge dialect has no form of it" in refused["message"]
    assert "pass them in as an input" in refused["message"]


def test_training_mode_is_one_warning_at_the_declaration_naming_the_layers(checked: tuple[Path, dict[str, Any]]) -> None:
    _, doc = checked
    [warning] = _diagnostics(doc, "dcgan.py", "training-mode")
    assert warning["severity"] == "warning" and warning["line"] == line_of("dcgan.py", "model = Generator()")
    layers = line_of("dcgan.py", "self.main = nn.Sequential(")
    assert f"`BatchNorm2d` `main.1` and `main.4` (dcgan.py:{layers})" in warning["message"], warning
    assert [(r["line"], r["message"]) for r in warning["related"]] == [(layers, "`main.1` (BatchNorm2d) is made here")]
    # Lowering's findings say the model is in training mode.
    onnx, executorch = _lowering(doc, "dcgan.py")
    assert onnx["status"] == "mismatch" and executorch["status"] == "error", (onnx, executorch)
    for code in ("lowering/onnx-mismatch", "lowering/executorch-error"):
        [found] = _diagnostics(doc, "dcgan.py", code)
        assert "The model is in training mode, with `BatchNorm2d` `main.1` and `main.4`" in found["message"], found
    # Nothing else in the corpus is in training mode with such layers but the dropout classifier.
    assert [f["path"] for f in doc["files"] if _diagnostics(doc, f["path"], "training-mode")] == ["dcgan.py", "dropout.py"]


def test_dropout_in_training_mode_is_random_and_in_training(checked: tuple[Path, dict[str, Any]]) -> None:
    _, doc = checked
    [warning] = _diagnostics(doc, "dropout.py", "training-mode")
    assert f"`Dropout` `drop` (dropout.py:{line_of('dropout.py', 'self.drop = nn.Dropout(0.5)')})" in warning["message"], warning
    assert "dropout zeroes random elements" in warning["message"]
    onnx, _ = _lowering(doc, "dropout.py")
    [out] = onnx["outputs"]
    assert out["compared"] == "shape" and "depends on random numbers" in out["note"], out


def test_the_eval_fix_removes_the_warning_on_export(checked: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    from exportlens.core.fixes import apply, fixes_for
    from exportlens.core.model.results import Diagnostic, FileResult

    _, doc = checked
    [warning] = _diagnostics(doc, "dcgan.py", "training-mode")
    source = (CORPUS / "dcgan.py").read_text()
    diagnostic = Diagnostic(warning["code"], warning["message"], warning["line"], warning["column"], warning["end_line"], warning["end_column"], warning["target"])
    [fix] = fixes_for(source, diagnostic, FileResult(path=str(CORPUS / "dcgan.py")))
    assert fix.preferred and fix.title == "put the model in eval mode: `Generator().eval()`"
    edited = apply(source, fix.edits)
    assert "model = Generator().eval()\n" in edited
    (tmp_path / "dcgan.py").write_text(edited)
    _, after = check_json("dcgan.py", cwd=tmp_path, extra=("--no-cache",))
    [entry] = after["files"]
    assert [d["code"] for d in entry["diagnostics"]] == []  # no warning, and no running-statistics updates
    assert [o["kind"] for o in entry["targets"][0]["signature"]["outputs"]] == ["USER_OUTPUT"]
