"""Do onnxruntime's outputs match eager PyTorch's? Tolerances per dtype, errors per output.

Lowering runs the model twice on the example inputs -- eager PyTorch and the ONNX
model in onnxruntime -- and compares what they return here. Kernels differ between
the two (another summation order, fused ops), so floats are compared within a
tolerance that follows the dtype's precision, as ``torch.testing.assert_close`` does,
widened for float32 because a different runtime reorders reductions where
``assert_close`` compares one runtime with itself. Integers and booleans must be
equal. The tolerances are part of the result, so a user reading "match" knows how
close that is. Runs in the job process (torch).
"""

from __future__ import annotations

from typing import Any

from exportlens.core.model.lowering import OutputComparison

# dtype name -> (atol, rtol): |ort - eager| <= atol + rtol * |eager| elementwise.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "complex128": (1e-7, 1e-7),
    "float32": (1e-5, 1e-4),
    "complex64": (1e-5, 1e-4),
    "float16": (1e-3, 1e-2),
    "bfloat16": (1e-2, 1.6e-2),
}
EXACT = (0.0, 0.0)  # integers, booleans and anything else: equal or not


def dtype_name(tensor: Any) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def compare(name: str, actual: Any, expected: Any) -> OutputComparison:
    """onnxruntime's ``actual`` against eager's ``expected`` (tensors or Python numbers)."""
    import torch

    expected_t = expected if isinstance(expected, torch.Tensor) else torch.as_tensor(expected)
    actual_t = actual if isinstance(actual, torch.Tensor) else torch.as_tensor(actual)
    dtype = dtype_name(expected_t)
    atol, rtol = TOLERANCES.get(dtype, EXACT)
    if tuple(actual_t.shape) != tuple(expected_t.shape):
        return OutputComparison(name, dtype, float("inf"), float("inf"), atol, rtol, ok=False, shape_ok=False)
    if expected_t.numel() == 0:
        return OutputComparison(name, dtype, 0.0, 0.0, atol, rtol, ok=True)
    wide = torch.complex128 if expected_t.is_complex() else torch.float64
    e = expected_t.detach().to("cpu").resolve_conj().to(wide)
    a = actual_t.detach().to("cpu").resolve_conj().to(wide)
    same = (a == e) | (torch.isnan(a) & torch.isnan(e))  # inf == inf and NaN where both are NaN
    diff = torch.where(same, torch.zeros((), dtype=torch.float64), (a - e).abs().to(torch.float64))
    diff = torch.nan_to_num(diff, nan=float("inf"))  # NaN on one side only: as far apart as it gets
    scale = e.abs().to(torch.float64)
    nonzero = scale > 0
    max_abs = float(diff.max())
    max_rel = float((diff[nonzero] / scale[nonzero]).max()) if bool(nonzero.any()) else (0.0 if max_abs == 0 else float("inf"))
    ok = bool((same | (diff <= atol + rtol * scale)).all())  # NaN's scale is NaN: "same" decides there
    return OutputComparison(name, dtype, max_abs, max_rel, atol, rtol, ok=ok)
