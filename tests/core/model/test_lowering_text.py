"""The one line a lowering record gives people (hover, the text report): what was not
run says what was done first, and never claims a step that did not happen."""

from __future__ import annotations

from exportlens.core.model.lowering import Lowering, OutputComparison

WHY = "the model was built with fake weights"


def test_onnx_not_run_says_nothing_was_converted() -> None:
    # ONNX's model holds the weights' values: with fake ones nothing is converted at all.
    assert Lowering("onnx", "not-run", skipped=WHY).describe() == f"not lowered to ONNX: {WHY}"


def test_executorch_not_run_says_its_edge_program_was_made() -> None:
    text = Lowering("executorch", "not-run", lower_ms=12.0, delegated_ops=2, total_ops=3, skipped=WHY).describe()
    assert text == f"lowered to ExecuTorch's edge dialect (XNNPACK runs 2 of 3 ops; 1 fall back, 12 ms); not run: {WHY}"


def _out(name: str, compared: str = "values", max_abs: float = 1e-7) -> OutputComparison:
    note = "depends on random numbers (`aten::randn_like` at vae.py:23)" if compared == "shape" else ""
    return OutputComparison(name, "float32", max_abs, 0.0, 1e-5, 1e-4, ok=True, compared=compared, note=note)


def test_an_output_of_random_numbers_is_said_compared_by_shape_not_by_error() -> None:
    # A VAE's sample depends on randn_like: its error is not a figure, and the line says so.
    vae = Lowering("onnx", "ok", opset=20, nodes=14, lower_ms=5.0, outputs=(_out("sigmoid", "shape", 0.0), _out("mu"), _out("logvar")))
    assert vae.describe() == (
        "lowers to ONNX (opset 20, 14 nodes, 5 ms), outputs match (max error 1e-07; 1 of 3 outputs compared by shape and dtype only: it depends on random numbers)"
    )
    dropout = Lowering("onnx", "ok", opset=20, nodes=4, lower_ms=5.0, outputs=(_out("linear", "shape", 0.0),))
    assert dropout.describe() == "lowers to ONNX (opset 20, 4 nodes, 5 ms), outputs match (the output compared by shape and dtype only: it depends on random numbers)"
    assert "n/a" not in dropout.describe()


def test_a_plain_match_and_mismatch_keep_their_figures() -> None:
    assert Lowering("onnx", "ok", lower_ms=1.0, outputs=(_out("y"),)).describe() == "lowers to ONNX (1 ms), outputs match (max error 1e-07)"
    bad = Lowering("onnx", "mismatch", lower_ms=1.0, outputs=(_out("y", max_abs=0.5),))
    assert bad.describe() == "lowers to ONNX (1 ms), outputs DIFFER (max error 0.5, max relative 0)"
