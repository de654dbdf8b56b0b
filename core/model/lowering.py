"""What lowering an exported program to a deployment format found: the record every
front end shows (JSON, ``show``, hover). Torch-free, like the rest of ``core.model``.

Lowering is the step after ``torch.export`` that users export *for*: convert the
program to ONNX, check the model, run it in onnxruntime on the example inputs and
compare with the eager outputs. The job process fills a :class:`Lowering` per
exported target when the request asks for it (``ExportRequest.lower``); the
diagnostics it raises (``lowering/onnx-*``) travel beside it, as every finding does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The formats a target can be lowered to: the values of ``[tool.exportlens] lower``,
# ``check --lower`` and the editor's ``lower`` setting.
LOWER_FORMATS: tuple[str, ...] = ("onnx",)

# ok: converted, checked, run, outputs within tolerance. mismatch: ran, outputs
# differ. unsupported: an op has no translation. error: any other failure.
# unavailable: the packages it needs are not installed (the ``onnx`` extra).
LoweringStatus = Literal["ok", "mismatch", "unsupported", "error", "unavailable"]

# What a user installs to lower to ONNX (the extra's packages, see pyproject.toml).
ONNX_PACKAGES: tuple[str, ...] = ("onnx", "onnxscript", "onnxruntime")
ONNX_INSTALL = "pip install 'exportlens[onnx]'"


@dataclass(frozen=True)
class OutputComparison:
    """One model output: onnxruntime's value against eager PyTorch's."""

    name: str  # the ONNX graph output's name (torch's output node name)
    dtype: str  # torch's dtype name without the prefix: "float32"
    max_abs: float  # max |ort - eager|
    max_rel: float  # max |ort - eager| / |eager| (over elements where eager != 0)
    atol: float  # the tolerance applied: |ort - eager| <= atol + rtol * |eager|
    rtol: float
    ok: bool
    shape_ok: bool = True  # False: the shapes differ, the numbers were not compared


@dataclass(frozen=True)
class Lowering:
    format: str  # one of LOWER_FORMATS
    status: LoweringStatus
    lower_ms: float = 0.0  # conversion, checker, session and run: the job's cost of lowering
    opset: int | None = None  # the default-domain opset of the model
    nodes: int | None = None  # nodes in the model's main graph
    outputs: tuple[OutputComparison, ...] = ()
    versions: str = ""  # "onnx 1.23.2, onnxscript 0.7.2, onnxruntime 1.32.0"
    # The serialized ONNX model, only when the request asked to keep it (``--save-onnx``).
    model: bytes = b""

    @property
    def max_abs(self) -> float | None:
        compared = [o.max_abs for o in self.outputs if o.shape_ok]
        return max(compared) if compared else None

    @property
    def max_rel(self) -> float | None:
        compared = [o.max_rel for o in self.outputs if o.shape_ok]
        return max(compared) if compared else None

    def describe(self) -> str:
        """One line for people: ``lowers to ONNX (opset 20, 3 nodes, 720 ms), outputs match (max error 6e-08)``."""
        name = self.format.upper()
        facts = [f"opset {self.opset}" if self.opset is not None else "", f"{self.nodes} nodes" if self.nodes is not None else "", f"{self.lower_ms:.0f} ms"]
        detail = f" ({', '.join(f for f in facts if f)})"
        if self.status == "ok":
            return f"lowers to {name}{detail}, outputs match (max error {_number(self.max_abs)})"
        if self.status == "mismatch":
            return f"lowers to {name}{detail}, outputs DIFFER (max error {_number(self.max_abs)}, max relative {_number(self.max_rel)})"
        if self.status == "unsupported":
            return f"does not lower to {name}: an op has no translation"
        if self.status == "unavailable":
            return f"not lowered to {name}: {ONNX_INSTALL} first"
        return f"does not lower to {name}"


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"
