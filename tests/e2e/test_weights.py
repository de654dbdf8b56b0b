"""Models built with fake weights give the result real weights give (``--weights``).

Through the real CLI. The tests lower the size from which tensors are built fake
(``EXPORTLENS_FAKE_MIN_BYTES``) so that small models exercise what a 70B model does:
every weight a module's construction makes is fake, and only the small tables a
constructor computes with stay real.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import check_json, run_cli

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "weights"
SMALL = {"EXPORTLENS_FAKE_MIN_BYTES": "4096"}  # weights fake, RoPE's 32 frequencies real


def _line(path: Path, text: str) -> int:
    """The 1-based line of ``path`` that holds ``text`` (once)."""
    [line] = [i for i, content in enumerate(path.read_text().splitlines(), start=1) if text in content]
    return line


def _targets(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for f in doc["files"] for t in f["targets"]}


def _diagnostics(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    return sorted((d["target"], d["code"], d["line"], d["column"], d["message"]) for f in doc["files"] for d in f["diagnostics"])


def _without_weights(target: dict[str, Any]) -> dict[str, Any]:
    # The check run on the example inputs is never made with fake weights (skipped).
    return {k: v for k, v in target.items() if k not in ("weights", "weights_note", "export_ms", "run")}


def _both(path: Path, *, env: dict[str, str] | None = None, extra: tuple[str, ...] = ()) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(real, auto)`` reports of one file, each exported afresh."""
    _, real = check_json(str(path), extra=("--no-cache", "--weights", "real", *extra), env=env or SMALL)
    _, auto = check_json(str(path), extra=("--no-cache", "--weights", "auto", *extra), env=env or SMALL)
    return real, auto


def test_idioms_export_with_fake_weights_as_with_real_ones(tmp_path: Path) -> None:
    path = tmp_path / "idioms.py"
    shutil.copy(FIXTURES / "idioms.py", path)
    real, auto = _both(path)
    real_targets, auto_targets = _targets(real), _targets(auto)
    assert sorted(auto_targets) == ["Cast", "Constants", "Initialised", "Rotary", "Tied", "WeightNormed", "meta_then_empty", "seeded", "viewed_prompt"]
    for name, target in auto_targets.items():
        assert target["status"] == "ok", (name, auto["files"][0]["diagnostics"])
        # Built without values, no fallback (Constants has no weights: its tensors are
        # constants, which torch computes with, made real again).
        assert target["weights"] == ("real" if name == "Constants" else "fake"), name
        assert "weights_note" not in target, name
        assert real_targets[name]["weights"] == "real"
        assert _without_weights(target) == _without_weights(real_targets[name]), name
    assert _diagnostics(auto) == _diagnostics(real)
    # The view's base has a range of its own, as with real weights (inputs stay real).
    assert len(auto_targets["viewed_prompt"]["signature"]["ranges"]) == 2, auto_targets["viewed_prompt"]["signature"]["ranges"]
    # Tied stays tied through .to(bfloat16): one parameter, listed under both names.
    tied = auto_targets["Tied"]["signature"]["inputs"]
    assert [(s["target"], s["dtype"]) for s in tied if s["kind"] == "PARAMETER"] == [("embed.weight", "bfloat16"), ("head.weight", "bfloat16")]


def test_a_decoder_written_as_deployment_code_exports_with_fake_weights(tmp_path: Path) -> None:
    """The 8B benchmark's model at test size: a static KV cache mutated at input_pos, RoPE
    rescaled by a Python loop in the constructor, trunc_normal_ init, cast to bf16."""
    path = tmp_path / "deploy.py"
    shutil.copy(FIXTURES / "deploy.py", path)
    real, auto = _both(path)
    [target] = _targets(auto).values()
    assert target["status"] == "ok" and target["weights"] == "fake" and "weights_note" not in target
    assert _without_weights(target) == _without_weights(_targets(real)["deploy_8b"])
    assert _diagnostics(auto) == _diagnostics(real)
    mutated = [s["target"] for s in target["signature"]["outputs"] if s["kind"] == "BUFFER_MUTATION"]
    assert mutated == ["layers.0.attention.cache_k", "layers.0.attention.cache_v", "layers.1.attention.cache_k", "layers.1.attention.cache_v"]


def test_fallbacks_give_the_real_weights_result_and_say_why(tmp_path: Path) -> None:
    path = tmp_path / "fallbacks.py"
    shutil.copy(FIXTURES / "fallbacks.py", path)
    real, auto = _both(path)
    assert _diagnostics(auto) == _diagnostics(real)
    real_targets, auto_targets = _targets(real), _targets(auto)
    for name, target in auto_targets.items():
        assert _without_weights(target) == _without_weights(real_targets[name]), name
        assert target["weights"] == "real", name
        assert "weights_note" not in real_targets[name]  # the user chose real: nothing to explain
    notes = {name: t["weights_note"] for name, t in auto_targets.items()}
    reads = _line(path, "float(self.w.abs().max())")
    assert notes["ReadsWeight"] == f"built with real weights: `fallbacks.py:{reads}` needs the values of a large tensor, which is built without them by default"
    assert f"`fallbacks.py:{_line(path, 'table.numpy()')}` needs the values" in notes["NumpyRoundTrip"]
    assert "an example input was built as a fake tensor" in notes["FakeInput"]
    assert "the eager run that explains why the export failed" in notes["TrainsInForward"]
    assert "the tensor attribute `table` (a constant to torch.export" in notes["ComputedConstant"]
    codes = {d[1] for d in _diagnostics(auto) if d[0] == "TrainsInForward"}
    assert codes == {"banned-mutation/parameter"}


def test_a_file_that_fails_for_its_own_reason_fails_once_with_its_own_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    shutil.copy(FIXTURES / "broken.py", path)
    real, auto = _both(path)
    assert _diagnostics(auto) == _diagnostics(real)
    [(target, code, line, _, message)] = _diagnostics(auto)
    assert (target, code, line) == (None, "import-error", _line(path, "decodr"))
    assert message == "running the module raised NameError: name 'decodr' is not defined"


def test_values_that_do_not_fit_the_memory_cap_are_said_not_run_out_of(tmp_path: Path) -> None:
    path = tmp_path / "over_cap.py"
    shutil.copy(FIXTURES / "over_cap.py", path)
    code, auto = check_json(str(path), extra=("--no-cache", "--memory-mb", "1024"))
    assert code == 1
    [d] = auto["files"][0]["diagnostics"]
    reads = _line(path, "float(self.w.max())")
    assert (d["code"], d["line"]) == ("import-error", reads)  # the line that read the value
    assert f"the model was built with fake weights, and `over_cap.py:{reads}` needs the values of a large tensor" in d["message"]
    assert "over the memory cap of 1024 MB (memory_mb)" in d["message"]

    code, real = check_json(str(path), extra=("--no-cache", "--memory-mb", "1024", "--weights", "real"))
    assert code == 1
    [d] = real["files"][0]["diagnostics"]
    assert d["code"] == "out-of-memory"
    assert 'weights = "auto"' in d["message"] and "--weights auto" in d["message"]


@pytest.mark.slow
def test_lowering_to_onnx_runs_real_weights_where_they_fit_and_says_why_not_where_not(tmp_path: Path) -> None:
    path = tmp_path / "lowered.py"
    shutil.copy(FIXTURES / "lowered.py", path)
    code, doc = check_json(str(path), extra=("--no-cache", "--lower", "onnx"))
    assert code == 0, doc["files"][0]["diagnostics"]
    [target] = _targets(doc).values()
    assert (target["weights"], target["lowering"]["status"]) == ("real", "ok")
    assert target["weights_note"] == "built with real weights: lowering to ONNX runs the program on its weights to compare it with eager PyTorch"

    # 16 MB of weights and torch do not fit a 1000 MB cap: no real run, and it says so.
    code, doc = check_json(str(path), extra=("--no-cache", "--lower", "onnx", "--memory-mb", "1000"))
    assert code == 1
    [target] = _targets(doc).values()
    assert (target["status"], target["weights"], target["lowering"]["status"]) == ("ok", "fake", "not-run")
    [d] = doc["files"][0]["diagnostics"]
    assert (d["code"], d["line"]) == ("lowering/onnx-error", _line(path, "class Net"))
    assert d["message"].startswith("lowering to ONNX was not done: the model was built with fake weights, and lowering to ONNX runs the program")
    assert "over the memory cap of 1000 MB (memory_mb)" in d["message"]


# -- checkpoints ---------------------------------------------------------------------


def _write_checkpoints(folder: Path) -> None:
    import safetensors.torch
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    # Sharded, as large checkpoints are: several files and an index.
    LlamaForCausalLM(config).save_pretrained(folder / "llama", max_shard_size="100KB")
    mlp = {"up.weight": torch.randn(256, 64), "up.bias": torch.randn(256), "down.weight": torch.randn(64, 256), "down.bias": torch.randn(64)}
    safetensors.torch.save_file(mlp, str(folder / "mlp.safetensors"))
    torch.save(mlp, folder / "mlp.pt")


@pytest.fixture(scope="module")
def checkpoint_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("checkpoints")
    shutil.copy(FIXTURES / "checkpoints.py", project / "checkpoints.py")
    _write_checkpoints(project / "checkpoints")
    return project


@pytest.mark.slow
def test_checkpoints_are_read_for_their_shapes_only(checkpoint_project: Path) -> None:
    assert len(list((checkpoint_project / "checkpoints" / "llama").glob("*.safetensors"))) > 1  # sharded
    real, auto = _both(checkpoint_project / "checkpoints.py")
    assert _diagnostics(auto) == _diagnostics(real) == []
    real_targets, auto_targets = _targets(real), _targets(auto)
    for name, target in auto_targets.items():
        assert target["status"] == "ok" and target["weights"] == "fake", name
        assert _without_weights(target) == _without_weights(real_targets[name]), name


def _corrupt(path: Path, how: str) -> None:
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    if how == "header":
        path.write_bytes(data[:8] + b"{not json" + data[17:])
    elif how == "truncated":
        path.write_bytes(data[: 8 + length + 100])  # the header claims more data than there is
    else:
        raise ValueError(how)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["header", "truncated"])
def test_a_corrupt_checkpoint_is_a_diagnostic_at_the_line_that_loads_it(tmp_path: Path, checkpoint_project: Path, how: str) -> None:
    project = tmp_path / "project"
    shutil.copytree(checkpoint_project, project)
    _corrupt(project / "checkpoints" / "mlp.safetensors", how)
    code, doc = check_json(str(project / "checkpoints.py"), extra=("--no-cache",), env=SMALL)
    assert code == 1
    [d] = [d for d in doc["files"][0]["diagnostics"] if d["target"] == "from_safetensors"]
    assert (d["code"], d["line"]) == ("target-error", _line(project / "checkpoints.py", "load_file("))
    assert "the safetensors file `mlp.safetensors` is not valid" in d["message"]
    # The other targets are not affected.
    statuses = {t["name"]: t["status"] for t in _targets(doc).values()}
    assert statuses == {"pretrained": "ok", "from_safetensors": "error", "from_torch_load": "ok"}, [d["message"] for d in doc["files"][0]["diagnostics"]]


def test_show_and_json_say_which_weights(tmp_path: Path) -> None:
    path = tmp_path / "idioms.py"
    shutil.copy(FIXTURES / "idioms.py", path)
    proc = run_cli("show", str(path), env=SMALL)
    assert proc.returncode == 0, proc.stderr
    assert "Tied (" in proc.stdout and "ok, exported in" in proc.stdout
    header = next(line for line in proc.stdout.splitlines() if line.startswith("Tied ("))
    assert header.endswith("with fake weights")
    proc = run_cli("check", "--format", "json", "--weights", "real", str(path), env=SMALL)
    assert {t["weights"] for t in _targets(json.loads(proc.stdout)).values()} == {"real"}
