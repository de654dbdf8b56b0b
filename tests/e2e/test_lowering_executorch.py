"""Lowering to ExecuTorch through the real CLI on real models (``check --lower
executorch``): a model fully delegated to XNNPACK that runs and matches, an op that
falls back to portable kernels (information at its line), an op the runtime has no
kernel for (at its line; the saved .pte really fails to load), a portable kernel
that computes otherwise (at the ``return``), a custom op with no out variant, a tiny
transformers Llama end to end, ``--save-pte``, a model large enough to be built with
fake weights (lowered as far as that allows, or with real ones to be saved), the text
report and the missing extra.

One ``check`` run holds every model (each lowering costs seconds on two cores)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

pytest.importorskip("executorch", reason="the exportlens[executorch] extra is not installed")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lowering"
OUTCOMES = (FIXTURES / "executorch_outcomes.py").read_text().splitlines()


def line_of(text: str, lines: list[str] = OUTCOMES) -> int:
    """The 1-based line of the fixture that holds ``text``."""
    [n] = [i for i, line in enumerate(lines, 1) if text in line]
    return n


def _project(tmp_path: Path, *names: str, pyproject: str = "") -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(pyproject)
    for name in names:
        shutil.copy(FIXTURES / name, project / name)
    return project


def _file(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in doc["files"] if f["path"] == name)


def _target(entry: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in entry["targets"] if t["name"] == name)


def _found(entry: dict[str, Any], target: str) -> list[tuple[str, int]]:
    return [(d["code"], d["line"]) for d in entry["diagnostics"] if d["target"] == target]


def _message(entry: dict[str, Any], code: str, target: str) -> str:
    [message] = [d["message"] for d in entry["diagnostics"] if d["code"] == code and d["target"] == target]
    return str(message)


@pytest.fixture(scope="module")
def lowered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, dict[str, Any]]:
    project = _project(tmp_path_factory.mktemp("executorch"), "executorch_outcomes.py", "tiny_llama.py", "big_weights.py")
    # A generous limit: a tiny Llama's export and lowering take ~40 s on two loaded cores.
    proc = run_cli("check", "--format", "json", "--lower", "executorch", "--save-pte", "pte", "--no-cache", "--jobs", "2", "--timeout", "900", ".", cwd=project)
    assert proc.returncode in (0, 1), proc.stderr
    return project, proc.returncode, json.loads(proc.stdout)


def test_a_model_xnnpack_takes_whole_runs_and_matches(lowered: tuple[Path, int, dict[str, Any]]) -> None:
    _, code, doc = lowered
    entry = _file(doc, "executorch_outcomes.py")
    assert _found(entry, "Delegated") == []
    low = _target(entry, "Delegated")["lowering"]["executorch"]
    assert low["format"] == "executorch" and low["status"] == "ok", low
    assert low["delegated_ops"] == low["total_ops"] == 3  # linear, relu, linear
    assert (low["fallback_lines"], low["fallback_ops"], low["errors"], low["skipped"]) == (0, [], [], None)
    assert low["pte_bytes"] > 1000 and low["planned_memory_bytes"] > 0 and low["lower_ms"] > 0
    [out] = low["outputs"]
    assert out["name"] == "linear_1" and out["match"] is True and (out["atol"], out["rtol"]) == (1e-5, 1e-4)
    assert low["versions"].startswith("executorch 1.")
    assert code == 1  # the other targets' errors


def test_the_saved_pte_runs_at_another_batch_size(lowered: tuple[Path, int, dict[str, Any]]) -> None:
    import torch
    from executorch.runtime import Runtime

    project, _, doc = lowered
    saved = sorted(p.name for p in (project / "pte").iterdir())
    # Every target whose program was built, the mismatching one too (it is the one to inspect).
    expected = ["big_weights.Big.pte", "executorch_outcomes.Delegated.pte", "executorch_outcomes.FallsBack.pte", "executorch_outcomes.HalfSum.pte", "executorch_outcomes.NeedsSort.pte", "tiny_llama.TinyLlama.pte"]
    assert saved == expected, saved
    pte = (project / "pte" / "executorch_outcomes.Delegated.pte").read_bytes()
    assert len(pte) == _target(_file(doc, "executorch_outcomes.py"), "Delegated")["lowering"]["executorch"]["pte_bytes"]
    [y] = Runtime.get().load_program(pte).load_method("forward").execute([torch.ones(9, 8)])
    assert tuple(y.shape) == (9, 4)  # the batch dim stayed dynamic (1..32)


def test_an_op_left_outside_the_delegate_is_information_at_its_line(lowered: tuple[Path, int, dict[str, Any]]) -> None:
    _, _, doc = lowered
    entry = _file(doc, "executorch_outcomes.py")
    assert _found(entry, "FallsBack") == [("lowering/executorch-not-delegated", line_of("running = torch.cumsum(h, dim=-1)"))]
    [d] = [d for d in entry["diagnostics"] if d["target"] == "FallsBack"]
    assert d["severity"] == "information"
    assert d["message"] == "`aten::cumsum` is not delegated to XNNPACK: it runs on portable CPU kernels"
    low = _target(entry, "FallsBack")["lowering"]["executorch"]
    assert low["status"] == "ok" and low["outputs"][0]["match"] is True
    assert (low["delegated_ops"], low["total_ops"], low["fallback_lines"], low["fallback_ops"]) == (3, 4, 1, ["aten::cumsum"])


def test_an_op_the_runtime_lacks_is_an_error_at_its_line(lowered: tuple[Path, int, dict[str, Any]]) -> None:
    import torch
    from executorch.runtime import Runtime

    project, _, doc = lowered
    entry = _file(doc, "executorch_outcomes.py")
    sort_line = line_of("ordered, _ = torch.sort(y, dim=-1)")
    assert _found(entry, "NeedsSort") == [("lowering/executorch-missing-kernel", sort_line), ("lowering/executorch-not-delegated", sort_line)]
    message = _message(entry, "lowering/executorch-missing-kernel", "NeedsSort")
    assert message.startswith("ExecuTorch's runtime has no kernel for `aten::sort.values`: the program builds, but its method fails to load"), message
    low = _target(entry, "NeedsSort")["lowering"]["executorch"]
    assert low["status"] == "missing-kernel" and low["errors"] == ["no kernel for aten::sort.values"] and low["outputs"] == []
    # What was reported is what happens: the runtime refuses to load the saved program.
    program = Runtime.get().load_program((project / "pte" / "executorch_outcomes.NeedsSort.pte").read_bytes())
    with pytest.raises(RuntimeError, match="Failed to load method forward"):
        program.load_method("forward").execute([torch.ones(3, 8)])


def test_outputs_that_differ_from_eager_are_an_error_at_the_return(lowered: tuple[Path, int, dict[str, Any]]) -> None:
    _, _, doc = lowered
    entry = _file(doc, "executorch_outcomes.py")
    assert _found(entry, "HalfSum") == [("lowering/executorch-not-delegated", line_of("totals = x.cumsum(dim=-1)")), ("lowering/executorch-mismatch", line_of("return totals"))]
    message = _message(entry, "lowering/executorch-mismatch", "HalfSum")
    # Eager sums the 4096 ones to 4096; float16 adding stops at 2048.
    assert message == (
        "ExecuTorch's output differs from eager PyTorch on the example inputs:\n"
        "`cumsum` (float16): max abs error 2.05e+03, max rel error 0.5 (tolerance: atol 0.001 + rtol 0.01 × |eager|)"
    ), message
    low = _target(entry, "HalfSum")["lowering"]["executorch"]
    assert low["status"] == "mismatch" and low["max_abs_error"] == 2048.0
    assert [(o["name"], o["dtype"], o["match"]) for o in low["outputs"]] == [("cumsum", "float16", False)]


def test_a_custom_op_without_an_out_variant_is_an_error_at_its_line(lowered: tuple[Path, int, dict[str, Any]]) -> None:
    _, _, doc = lowered
    entry = _file(doc, "executorch_outcomes.py")
    line = line_of("return twice(y)")
    assert _found(entry, "NoOutVariant") == [("lowering/executorch-error", line), ("lowering/executorch-not-delegated", line)]
    message = _message(entry, "lowering/executorch-error", "NoOutVariant")
    assert "'exportlens_test::twice' has none: define one for the custom op" in message
    assert message.endswith("RuntimeError: Missing out variants: {'exportlens_test::twice'}"), message  # ExecuTorch's own words, last
    low = _target(entry, "NoOutVariant")["lowering"]["executorch"]
    assert low["status"] == "error" and low["pte_bytes"] is None and low["delegated_ops"] == 1  # sin
    assert low["errors"] == ["RuntimeError: Missing out variants: {'exportlens_test::twice'}"]


def test_a_tiny_llama_lowers_runs_and_matches(lowered: tuple[Path, int, dict[str, Any]]) -> None:
    _, _, doc = lowered
    entry = _file(doc, "tiny_llama.py")
    target = _target(entry, "TinyLlama")
    low = target["lowering"]["executorch"]
    assert low["status"] == "ok", (low, entry["diagnostics"])
    assert 0 < low["delegated_ops"] < low["total_ops"]  # the linears delegated; the mask's ops are not
    assert low["outputs"][0]["match"] is True and low["pte_bytes"] > 10_000
    # The ops that fall back are made in transformers' code, no line of this file:
    # one note at the target, naming them.
    assert len(entry["diagnostics"]) == 1, entry["diagnostics"]
    [d] = entry["diagnostics"]
    assert (d["code"], d["line"]) == ("lowering/executorch-not-delegated", target["line"])
    assert f"{low['total_ops'] - low['delegated_ops']} ops no line of yours made (" in d["message"]
    assert "`aten::embedding`" in d["message"]


def test_saving_a_model_built_with_fake_weights_lowers_it_with_real_ones(lowered: tuple[Path, int, dict[str, Any]]) -> None:
    _, _, doc = lowered
    entry = _file(doc, "big_weights.py")
    target = _target(entry, "Big")
    low = target["lowering"]["executorch"]
    # --save-pte needs the values: the worker ran the target again with real weights.
    assert target["weights"] == "real" and "saving the ExecuTorch program (--save-pte) needs the weights' values" in target["weights_note"], target
    assert low["status"] == "ok" and low["pte_bytes"] > 2 << 20 and low["skipped"] is None  # the 2 MiB weight is in it
    big = (FIXTURES / "big_weights.py").read_text().splitlines()
    assert [(d["code"], d["line"]) for d in entry["diagnostics"]] == [("lowering/executorch-not-delegated", line_of("torch.cumsum", big))]


def test_a_model_built_with_fake_weights_is_partitioned_not_run(tmp_path: Path) -> None:
    """Without --save-pte nothing needs the values: the edge program and the XNNPACK
    partition are made from the fake weights, the .pte and the run are skipped."""
    project = _project(tmp_path, "big_weights.py", pyproject='[tool.exportlens]\nlower = ["executorch"]\n')
    proc = run_cli("show", "big_weights.py", "--no-cache", cwd=project)
    assert proc.returncode == 0, proc.stderr
    header = next(line for line in proc.stdout.splitlines() if line.startswith("Big (big_weights.py:"))
    assert " with fake weights; lowered to ExecuTorch's edge dialect (XNNPACK runs 2 of 3 ops; 1 line falls back, " in header, header
    # The memory plan needs no values: planned all the same (16,448 bytes with real weights
    # and XNNPACK's compiled delegate; 16,384 with the stand-in delegate).
    assert ", planned memory 16.0 KB, " in header, header
    assert header.endswith("; not run: built with fake weights: the edge program, its XNNPACK partition and its memory plan need no values, but the .pte was not built, run or compared with eager"), header
    assert "big_weights.py:12:9: information[lowering/executorch-not-delegated]: `aten::cumsum` is not delegated to XNNPACK" in proc.stdout


def test_without_the_extra_one_diagnostic_gives_the_pip_command(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "executorch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'executorch'\", name='executorch')\n")
    project = _project(tmp_path, "two_targets.py")
    proc = run_cli("check", "--format", "json", "--lower", "executorch", "--no-cache", ".", cwd=project, env={"PYTHONPATH": str(shadow.parent)})
    entry = _file(json.loads(proc.stdout), "two_targets.py")
    assert [(d["code"], d["line"]) for d in entry["diagnostics"]] == [("lowering/executorch-error", 8)]
    message = entry["diagnostics"][0]["message"]
    assert message == "lowering to ExecuTorch needs `executorch`, which cannot be imported here: run `pip install 'exportlens[executorch]'` in this environment"
    assert [t["lowering"]["executorch"]["status"] for t in entry["targets"]] == ["unavailable", "unavailable"]
    assert proc.returncode == 1
