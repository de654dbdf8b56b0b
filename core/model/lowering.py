"""What lowering an exported program to a deployment format found: the record every
front end shows (JSON, ``show``, hover, lens). Torch-free, like the rest of ``core.model``.

Lowering is the step after ``torch.export`` that users export *for*: convert the
program to ONNX (check it, run it in onnxruntime) or to an ExecuTorch program (edge
dialect, XNNPACK delegate, run in ExecuTorch's runtime), and compare with the eager
outputs. The job process fills one :class:`Lowering` per requested format and
exported target (``ExportRequest.lower``); the diagnostics it raises
(``lowering/<format>-*``) travel beside it, as every finding does. The record holds
counts, never lines: the lines are the diagnostics', which the cache moves after a
comment-only edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The formats a target can be lowered to: the values of ``[tool.exportlens] lower``,
# ``check --lower`` and the editor's ``lower`` setting.
LOWER_FORMATS: tuple[str, ...] = ("onnx", "executorch")

# ok: converted, checked, run, outputs within tolerance. mismatch: ran, outputs
# differ. unsupported: an op has no translation (ONNX). missing-kernel: the runtime
# has no kernel for an op of the program (ExecuTorch). not-run: lowered as far as
# the weights allow, not run (``skipped`` says why). error: any other failure.
# unavailable: the packages it needs are not installed (the format's extra), or were
# built for another torch than this one (``errors`` says which, with the command).
LoweringStatus = Literal["ok", "mismatch", "unsupported", "missing-kernel", "not-run", "error", "unavailable"]

# What a user installs to lower to each format (the extras' packages, see pyproject.toml).
ONNX_PACKAGES: tuple[str, ...] = ("onnx", "onnxscript", "onnxruntime")
ONNX_INSTALL = "pip install 'exportlens[onnx]'"
EXECUTORCH_PACKAGES: tuple[str, ...] = ("executorch",)
EXECUTORCH_INSTALL = "pip install 'exportlens[executorch]'"
PACKAGES: dict[str, tuple[str, ...]] = {"onnx": ONNX_PACKAGES, "executorch": EXECUTORCH_PACKAGES}
INSTALL: dict[str, str] = {"onnx": ONNX_INSTALL, "executorch": EXECUTORCH_INSTALL}
TITLES: dict[str, str] = {"onnx": "ONNX", "executorch": "ExecuTorch"}


@dataclass(frozen=True)
class OutputComparison:
    """One model output: the runtime's value against eager PyTorch's."""

    name: str  # the lowered program's output name (torch's output node name)
    dtype: str  # torch's dtype name without the prefix: "float32"
    max_abs: float  # max |runtime - eager|
    max_rel: float  # max |runtime - eager| / |eager| (over elements where eager != 0)
    atol: float  # the tolerance applied: |runtime - eager| <= atol + rtol * |eager|
    rtol: float
    ok: bool
    shape_ok: bool = True  # False: the shapes differ, the numbers were not compared
    # What was compared: "values" (elementwise, within the tolerance), "shape" (shapes
    # and dtypes only: the output depends on random numbers, two runs draw others),
    # "constant" (the program returns a constant -- ``None``, a number -- that no
    # runtime computes: eager's value against the signature's), "missing" (the
    # runtime returned nothing for this output).
    compared: str = "values"
    note: str = ""  # why it was compared so, for people ("depends on `torch.randn_like` at vae.py:21")


@dataclass(frozen=True)
class Lowering:
    format: str  # one of LOWER_FORMATS
    status: LoweringStatus
    lower_ms: float = 0.0  # conversion, checks, run, comparison: the job's cost of lowering
    opset: int | None = None  # ONNX: the default-domain opset of the model
    nodes: int | None = None  # ONNX: nodes in the model's main graph
    outputs: tuple[OutputComparison, ...] = ()
    versions: str = ""  # "onnx 1.23.2, onnxscript 0.7.2, onnxruntime 1.32.0"
    # The serialized program (ONNX model, ExecuTorch .pte), only when the request
    # asked to keep it (``--save-onnx``, ``--save-pte``).
    model: bytes = b""
    # ExecuTorch: ops of the edge program that run in the XNNPACK delegate, of all its
    # ops; the distinct user lines whose ops fall back to portable kernels, and
    # those ops' names. None where the edge program was not made.
    delegated_ops: int | None = None
    total_ops: int | None = None
    fallback_lines: int | None = None
    fallback_ops: tuple[str, ...] = ()
    pte_bytes: int | None = None  # ExecuTorch: the .pte program's size
    planned_memory_bytes: int | None = None  # ExecuTorch: the memory plan's arenas, summed
    # ExecuTorch: the largest value inside the XNNPACK delegate at the ``Dim``s' maxima,
    # which XNNPACK's workspace holds at least (``core/export/lowering/memory``); None
    # where nothing is delegated or a size has no maximum.
    workspace_bytes: int | None = None
    # The ``Dim``s whose maxima decide that value: "`batch` up to 32, `height` up to 1024".
    memory_dims: str = ""
    # The resident peak of loading and running the program in the runtime, over what
    # the job held before (Linux); None where it was not run or not measured.
    run_peak_bytes: int | None = None
    budget_bytes: int | None = None  # the budget the program's memory was held to (``memory_budget``)
    errors: tuple[str, ...] = ()  # what failed, one short line each (the diagnostics say where)
    skipped: str = ""  # why the lowering stopped short on purpose (``not-run``)

    @property
    def max_abs(self) -> float | None:
        compared = [o.max_abs for o in self.outputs if o.shape_ok and o.compared == "values"]
        return max(compared) if compared else None

    @property
    def max_rel(self) -> float | None:
        compared = [o.max_rel for o in self.outputs if o.shape_ok and o.compared == "values"]
        return max(compared) if compared else None

    @property
    def not_run_reason(self) -> str:
        """Why a ``not-run`` lowering was not run, in a few words (the lens's)."""
        if "fake weights" in self.skipped:
            return "fake weights"
        needed = self.needed_bytes
        return f"needs {size_text(needed)}" if needed is not None else "see hover"

    @property
    def title(self) -> str:
        return TITLES.get(self.format, self.format)

    def coverage(self) -> str | None:
        """``XNNPACK runs 42 of 45 ops; 3 lines fall back``, when the edge program was made."""
        if self.delegated_ops is None or self.total_ops is None:
            return None
        text = f"XNNPACK runs {self.delegated_ops} of {_plural(self.total_ops, 'op')}"
        if self.fallback_lines:
            text += f"; {_plural(self.fallback_lines, 'line')} fall{'s' * (self.fallback_lines == 1)} back"
        elif self.delegated_ops < self.total_ops:
            text += f"; {self.total_ops - self.delegated_ops} fall back"
        return text

    @property
    def needed_bytes(self) -> int | None:
        """What the program needs to run on a device: its plan and XNNPACK's workspace
        (at least its largest value), at the ``Dim``s' maxima; None where not planned."""
        if self.planned_memory_bytes is None:
            return None
        return self.planned_memory_bytes + (self.workspace_bytes or 0)

    def sizes(self) -> str | None:
        """``.pte 283.9 KB, planned memory 32.6 KB``, when the program was made; with
        XNNPACK's workspace where ``Dim``s decide it, and the run's peak when measured."""
        facts = [
            f".pte {size_text(self.pte_bytes)}" if self.pte_bytes is not None else "",
            f"planned memory {size_text(self.planned_memory_bytes)}" if self.planned_memory_bytes is not None else "",
        ]
        if self.workspace_bytes is not None and self.memory_dims:
            facts.append(f"XNNPACK workspace at least {size_text(self.workspace_bytes)}")
        if self.run_peak_bytes is not None:
            facts.append(f"run peak {size_text(self.run_peak_bytes)}")
        return ", ".join(f for f in facts if f) or None

    def _errors_text(self, *, relative: bool) -> str:
        """``max error 6e-08``, and how many outputs only their shape could be compared of
        (they depend on random numbers: each output's note names the line); never
        ``n/a`` where nothing was compared by value."""
        random = sum(1 for o in self.outputs if o.compared == "shape")
        by_shape = f"compared by shape and dtype only: {'it depends' if random == 1 else 'they depend'} on random numbers"
        if self.max_abs is None and random:
            return f"{'the output' if random == len(self.outputs) == 1 else f'{random} of {len(self.outputs)} outputs'} {by_shape}"
        text = f"max error {_number(self.max_abs)}" + (f", max relative {_number(self.max_rel)}" if relative else "")
        if random:
            text += f"; {random} of {len(self.outputs)} outputs {by_shape}"
        return text

    def describe(self) -> str:
        """One line for people: ``lowers to ONNX (opset 20, 3 nodes, 720 ms), outputs match (max error 6e-08)``."""
        name = self.title
        facts = [f"opset {self.opset}" if self.opset is not None else "", f"{self.nodes} nodes" if self.nodes is not None else ""]
        facts += [self.coverage() or "", self.sizes() or "", f"{self.lower_ms:.0f} ms"]
        detail = f" ({', '.join(f for f in facts if f)})"
        if self.status == "ok":
            return f"lowers to {name}{detail}, outputs match ({self._errors_text(relative=False)})"
        if self.status == "mismatch":
            return f"lowers to {name}{detail}, outputs DIFFER ({self._errors_text(relative=True)})"
        if self.status == "unsupported":
            return f"does not lower to {name}: an op has no translation"
        if self.status == "missing-kernel":
            return f"lowers to {name}{detail}, but the runtime has no kernel for {_plural(len(self.errors), 'op')}: the method does not load"
        if self.status == "not-run" and self.format == "executorch":
            return f"lowered to {name}'s edge dialect{detail}; not run: {self.skipped}"
        if self.status == "not-run":  # ONNX: its model holds the weights' values, so nothing is converted
            return f"not lowered to {name}: {self.skipped}"
        if self.status == "unavailable":
            return f"not lowered to {name}: {self.errors[0] if self.errors else INSTALL.get(self.format, 'install its extra') + ' first'}"
        return f"does not lower to {name}"


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "gb": 1 << 30,
    "gib": 1 << 30,
    "tb": 1 << 40,
    "tib": 1 << 40,
}


def parse_size(value: object) -> int | None:
    """A memory size as bytes: a whole number of bytes, or ``"512 MB"``, ``"1.5GB"``,
    ``"64 MiB"`` (powers of 1024, as ``size_text`` writes them: KB and KiB alike);
    None for anything else, or a size below one byte."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if not isinstance(value, str):
        return None
    text = value.strip().lower().replace(" ", "").replace("_", "")
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(number) :]
    if unit not in _UNITS or not number:
        return None
    try:
        amount = float(number)
    except ValueError:
        return None
    if not amount == amount or amount in (float("inf"),) or amount * _UNITS[unit] < 1:
        return None
    return int(amount * _UNITS[unit])


def size_text(n: int | None) -> str:
    """``812 B``, ``283.9 KB``, ``12.4 MB`` (powers of 1024, as memory is counted)."""
    if n is None:
        return "n/a"
    value = float(n)
    for unit in ("KB", "MB", "GB"):
        if value < 1024:
            break
        value /= 1024
        if value < 1024 or unit == "GB":
            return f"{value:.1f} {unit}"
    return f"{n} B"
