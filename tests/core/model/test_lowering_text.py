"""The one line a lowering record gives people (hover, the text report): what was not
run says what was done first, and never claims a step that did not happen."""

from __future__ import annotations

from exportlens.core.model.lowering import Lowering

WHY = "the model was built with fake weights"


def test_onnx_not_run_says_nothing_was_converted() -> None:
    # ONNX's model holds the weights' values: with fake ones nothing is converted at all.
    assert Lowering("onnx", "not-run", skipped=WHY).describe() == f"not lowered to ONNX: {WHY}"


def test_executorch_not_run_says_its_edge_program_was_made() -> None:
    text = Lowering("executorch", "not-run", lower_ms=12.0, delegated_ops=2, total_ops=3, skipped=WHY).describe()
    assert text == f"lowered to ExecuTorch's edge dialect (XNNPACK runs 2 of 3 ops; 1 fall back, 12 ms); not run: {WHY}"
