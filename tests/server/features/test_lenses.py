"""Code lens titles (``features/lenses.py``) for what a target's export found: the
counts a user reads at a glance, the failing code, lowering's outcome."""

from __future__ import annotations

from exportlens.core.model.lowering import Lowering
from exportlens.core.model.results import Diagnostic, FileResult, TargetResult
from exportlens.core.model.signature import ArgSpec, InputSpec, OutputSpec, Signature
from exportlens.server.features.lenses import lowering_title, status_title


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
    t = TargetResult("Net", 3, "ok", signature=SIG)
    assert lowering_title(t) is None
    assert lowering_title(TargetResult("Net", 3, "ok", lowering=Lowering("onnx", "ok", opset=18, nodes=42))) == "ONNX ✓ opset 18 · 42 nodes"
    assert lowering_title(TargetResult("Net", 3, "ok", lowering=Lowering("onnx", "mismatch"))) == "ONNX ✗ mismatch"
    assert lowering_title(TargetResult("Net", 3, "ok", lowering=Lowering("onnx", "unavailable"))) == "ONNX: not installed"
