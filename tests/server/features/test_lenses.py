"""Code lens titles (``features/lenses.py``) for what a target's export found: the
counts a user reads at a glance, the failing code, lowering's outcome."""

from __future__ import annotations

from exportlens.core.model.lowering import Lowering
from exportlens.core.model.results import Diagnostic, FileResult, TargetResult
from exportlens.core.model.signature import ArgSpec, InputSpec, OutputSpec, Signature
from exportlens.server.features.lenses import lenses_for, lowering_title, status_title
from exportlens.server.state import DocumentState


def spec(kind: str, name: str) -> InputSpec:
    return InputSpec(kind, ArgSpec("tensor", name))


SIG = Signature(
    inputs=(spec("PARAMETER", "p_w"), spec("PARAMETER", "p_b"), spec("BUFFER", "b_n"), spec("USER_INPUT", "x"), spec("USER_INPUT", "y")),
    outputs=(OutputSpec("BUFFER_MUTATION", ArgSpec("tensor", "add")), OutputSpec("USER_OUTPUT", ArgSpec("tensor", "out"))),
)


def test_an_exported_target_says_time_counts_and_mutations() -> None:
    t = TargetResult("Net", 3, "ok", export_ms=812.4, signature=SIG)
    title = status_title(t, FileResult("m.py", targets=(t,)), cached=False)
    assert title == "✓ Net exported in 812 ms · 2 inputs → 1 output · 2 parameters · 1 buffer · 1 mutated"
    assert status_title(t, FileResult("m.py", targets=(t,)), cached=True).startswith("✓ Net exported in 812 ms (cached) · ")


def test_a_failed_target_names_its_first_error() -> None:
    t = TargetResult("Net", 3, "error")
    result = FileResult(
        "m.py",
        diagnostics=(
            Diagnostic("mutation/buffer", "m", 4, target="Net"),  # information: not why it failed
            Diagnostic("constraint-violation", "m", 9, target="Net"),
            Diagnostic("export-error", "m", 9, target="Other"),
        ),
        targets=(t,),
    )
    assert status_title(t, result, cached=False) == "✗ Net: constraint-violation"
    assert status_title(t, FileResult("m.py", targets=(t,)), cached=False) == "✗ Net: export failed"


def test_lowering_titles() -> None:
    assert lowering_title(Lowering("onnx", "ok", opset=18, nodes=42)) == "ONNX ✓ opset 18 · 42 nodes"
    assert lowering_title(Lowering("onnx", "mismatch")) == "ONNX ✗ mismatch"
    assert lowering_title(Lowering("onnx", "unavailable")) == "ONNX: not installed"
    et = Lowering("executorch", "ok", delegated_ops=42, total_ops=45, fallback_lines=3, pte_bytes=290688, planned_memory_bytes=33376)
    assert lowering_title(et) == "ExecuTorch ✓ XNNPACK runs 42 of 45 ops; 3 lines fall back · .pte 283.9 KB, planned memory 32.6 KB"
    whole = Lowering("executorch", "ok", delegated_ops=7, total_ops=7, fallback_lines=0, pte_bytes=900, planned_memory_bytes=0)
    assert lowering_title(whole) == "ExecuTorch ✓ XNNPACK runs 7 of 7 ops · .pte 900 B, planned memory 0 B"
    one = Lowering("executorch", "missing-kernel", delegated_ops=2, total_ops=4, fallback_lines=1)
    assert lowering_title(one) == "ExecuTorch ✗ missing-kernel · XNNPACK runs 2 of 4 ops; 1 line falls back"
    fake = Lowering("executorch", "not-run", delegated_ops=2, total_ops=2, fallback_lines=0, skipped="fake weights")
    assert lowering_title(fake) == "ExecuTorch · XNNPACK runs 2 of 2 ops · not run (fake weights)"
    too_big = Lowering("executorch", "not-run", delegated_ops=5, total_ops=6, fallback_lines=1, pte_bytes=1 << 18, planned_memory_bytes=1 << 30, workspace_bytes=1 << 33, memory_dims="`h` up to 1024", skipped="it needs at least 9.0 GB to run, more than ...")
    assert lowering_title(too_big) == "ExecuTorch · XNNPACK runs 5 of 6 ops; 1 line falls back · .pte 256.0 KB, planned memory 1.0 GB, XNNPACK workspace at least 8.0 GB · not run (needs 9.0 GB)"
    assert lowering_title(Lowering("executorch", "unavailable")) == "ExecuTorch: not installed"


def test_a_lens_per_lowering_in_the_requested_order() -> None:
    lowerings = (Lowering("executorch", "ok", delegated_ops=1, total_ops=1), Lowering("onnx", "ok", opset=18, nodes=3))
    t = TargetResult("Net", 1, "ok", signature=SIG, lowerings=lowerings)
    state = DocumentState("file:///m.py", "/m.py", result=FileResult("/m.py", targets=(t,)), result_lines=["class Net:"])
    titles = [lens.command.title for lens in lenses_for(state, ["class Net:"], "file:///m.py") if lens.command is not None]
    assert titles[1:] == ["ExecuTorch ✓ XNNPACK runs 1 of 1 op", "ONNX ✓ opset 18 · 3 nodes"]  # after the status (no program: no "Show graph")
