"""A torch-free model of a functional ``ExportGraphSignature``.

It mirrors ``torch/export/graph_signature.py`` (kinds, specs, argument kinds,
``persistent``) plus what an editor needs on top: tensor metadata, symbol ranges
and the source line each spec comes from. The worker builds it from a real
``ExportedProgram``; the CLI and the server only ever read it.

Kinds are kept as plain strings, not enums: a kind this version does not know
(from a newer torch, or a corrupt payload) must survive decoding so that it can be
reported as ``unknown-input-kind`` instead of crashing the reader.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

INPUT_KINDS: tuple[str, ...] = (
    "USER_INPUT",
    "PARAMETER",
    "BUFFER",
    "CONSTANT_TENSOR",
    "CUSTOM_OBJ",
    "TOKEN",
)
OUTPUT_KINDS: tuple[str, ...] = (
    "USER_OUTPUT",
    "LOSS_OUTPUT",
    "BUFFER_MUTATION",
    "PARAMETER_MUTATION",
    "GRADIENT_TO_PARAMETER",
    "GRADIENT_TO_USER_INPUT",
    "USER_INPUT_MUTATION",
    "TOKEN",
)
# torch's argument classes, by the name the JSON contract uses for each.
ARG_KINDS: tuple[str, ...] = (
    "tensor",
    "symint",
    "symfloat",
    "symbool",
    "constant",
    "custom_obj",
    "token",
)

# A dimension is an int or the name of a symbol ("s0").
Dim = int | str


@dataclass(frozen=True)
class TensorMeta:
    dtype: str  # torch's name without the prefix: "float32"
    shape: tuple[Dim, ...]
    device: str  # "cpu", "meta", "cuda:0"
    requires_grad: bool = False

    def short(self) -> str:
        """``f32[s0, 3]``, the notation torch prints in graph code."""
        dims = ", ".join(str(d) for d in self.shape)
        return f"{_DTYPE_ABBR.get(self.dtype, self.dtype)}[{dims}]"


@dataclass(frozen=True)
class ArgSpec:
    """One graph argument: torch's ``TensorArgument``, ``ConstantArgument``, ..."""

    kind: str  # one of ARG_KINDS (kept as read, even if unknown)
    name: str
    value: Any = None  # constants only: int, float, bool, str or None
    class_fqn: str | None = None  # custom objects only
    meta: TensorMeta | None = None  # tensors only; a symint's symbol is in `value`


@dataclass(frozen=True)
class SourceLine:
    line: int  # 1-based
    column: int = 1  # 1-based
    end_line: int | None = None
    end_column: int | None = None
    # The file of the line when it is not the declaring file: a local module the
    # target's code lives in (``pkg/model.py`` behind ``targets.py``), as a real path.
    path: str | None = None


@dataclass(frozen=True)
class InputSpec:
    kind: str
    arg: ArgSpec
    target: str | None = None
    persistent: bool | None = None
    source: SourceLine | None = None


@dataclass(frozen=True)
class OutputSpec:
    kind: str
    arg: ArgSpec
    target: str | None = None
    source: SourceLine | None = None


@dataclass(frozen=True)
class Signature:
    inputs: tuple[InputSpec, ...]
    outputs: tuple[OutputSpec, ...]
    # symbol -> (min, max); None stands for an unbounded end.
    ranges: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    # symbol -> the name of the ``Dim`` the user declared for it ("s77" -> "batch").
    # Shapes and ranges keep torch's symbols (the JSON contract prints them); the
    # snapshot names dims by these, because torch's numbering moves with unrelated
    # changes (strict mode, another input) while the user's names do not. Symbols
    # of ``Dim.AUTO``/``Dim.DYNAMIC`` dims have no name and are not here.
    dim_names: dict[str, str] = field(default_factory=dict)

    def named(self, text: str) -> str:
        """``text`` (a dim, a shape, an expression) with torch's symbols replaced by
        the user's ``Dim`` names: ``2*s47 + 1`` -> ``2*width + 1``."""
        return named_dims(text, self.dim_names)

    def torch_text(self) -> str:
        """The signature exactly as ``print(ep.graph_signature)`` shows it."""
        ins = "\n".join(spec_text(i) for i in self.inputs)
        outs = "\n".join(spec_text(o) for o in self.outputs)
        return "\n# inputs\n" + ins + "\n\n# outputs\n" + outs + "\n"


_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def named_dims(text: str, names: Mapping[str, str]) -> str:
    """``text`` with each symbol in ``names`` (``{"s47": "width"}``) replaced by its name."""
    return _SYMBOL.sub(lambda m: names.get(m.group(0), m.group(0)), text) if names else text


def spec_text(spec: InputSpec | OutputSpec) -> str:
    """One line of ``print(ep.graph_signature)``: ``name: KIND target='t' persistent=B``."""
    target = "" if spec.target is None else f" target='{spec.target}'"
    persistent = ""
    if isinstance(spec, InputSpec) and spec.persistent is not None:
        persistent = f" persistent={spec.persistent}"
    return f"{spec.arg.name}: {spec.kind}{target}{persistent}"


_DTYPE_ABBR = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
    "int64": "i64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "uint8": "u8",
    "bool": "b8",
    "complex64": "c64",
    "complex128": "c128",
}
