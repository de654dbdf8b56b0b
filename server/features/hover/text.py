"""Hover text: signature specs that read well in VS Code, Neovim and plain-text clients.

Written in the client's markup (``exportlens.server.markup``: markdown or plain
text, the same information). Neovim renders hover markdown in a plain float (no
pipe tables), so every table is aligned lines (a fenced ``text`` block in markdown)
and everything else is a bold first line and short paragraphs. Specs are printed exactly as ``print(ep.graph_signature)`` prints them
(``b_steps: BUFFER target='steps' persistent=True``) followed by the tensor's
``dtype[shape] device``; symbolic dimensions get their ranges underneath. A symbol
torch made for a ``Dim`` the user declared is shown by that name (``float32[batch,
16]``, ``batch ∈ [2, 64]``), and a line ``batch is torch's s77`` keeps torch's name
at hand: it is the one torch's own messages and ``print(ep)`` use.

Pure string building, torch-free; unknown kinds are just strings and print as is.
The functions that write markup take the writer (``m``) first; the others are the
same text in every markup.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeAlias

from exportlens.core.model import repeated
from exportlens.core.model.lowering import Lowering, OutputComparison
from exportlens.core.model.results import Diagnostic, TargetResult
from exportlens.core.model.signature import InputSpec, OutputSpec, Signature, named_dims, spec_text
from exportlens.server.markup import Markup

Spec: TypeAlias = InputSpec | OutputSpec
# torch's symbol -> the user's Dim name (``Signature.dim_names``).
Names: TypeAlias = Mapping[str, str]
Ranges: TypeAlias = dict[str, tuple[int | None, int | None]]
_NO_NAMES: Names = {}

_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def value_text(spec: Spec, names: Names = _NO_NAMES) -> str:
    """What the argument holds: ``float32[batch, 3] cpu``, ``= 2``, ``symint s0``, ...
    (symbols by the user's ``Dim`` names where ``names`` has them)."""
    arg = spec.arg
    if arg.meta is not None:
        dims = ", ".join(named_dims(str(d), names) for d in arg.meta.shape)
        return f"{arg.meta.dtype}[{dims}] {arg.meta.device}"
    if arg.kind == "constant":
        return f"= {arg.value!r}"
    if arg.kind in ("symint", "symfloat", "symbool") and arg.value is not None:
        return f"{arg.kind} {named_dims(str(arg.value), names)}"
    if arg.kind == "custom_obj":
        return f"custom_obj {arg.class_fqn or '?'}"
    return arg.kind


def symbols(specs: Iterable[Spec]) -> list[str]:
    """The symbols (``s0``) the specs' shapes and symbolic values mention, in order."""
    seen: dict[str, None] = {}
    for spec in specs:
        texts: list[str] = []
        if spec.arg.meta is not None:
            texts = [d for d in spec.arg.meta.shape if isinstance(d, str)]
        elif spec.arg.kind.startswith("sym") and isinstance(spec.arg.value, str):
            texts = [spec.arg.value]
        for text in texts:
            for name in _SYMBOL.findall(text):
                seen.setdefault(name, None)
    return list(seen)


def _bound(value: int | None, sign: str) -> str:
    return f"{sign}∞" if value is None else str(value)


def range_line(name: str, bounds: tuple[int | None, int | None]) -> str:
    try:
        lo, hi = bounds
    except (TypeError, ValueError):  # a malformed payload still displays
        return f"{name} ∈ {bounds!r}"
    return f"{name} ∈ [{_bound(lo, '-')}, {_bound(hi, '')}]"


def torch_name_lines(used: Iterable[str], names: Names) -> list[str]:
    """``batch is torch's s77`` for each of the symbols ``used`` that has a Dim name."""
    return [f"{names[s]} is torch's {s}" for s in used if s in names]


def range_lines(specs: Sequence[Spec], ranges: Ranges, names: Names = _NO_NAMES) -> list[str]:
    """``batch ∈ [2, 1024]`` (``s0 ∈ ...`` for a symbol no Dim names) for each symbol
    the specs use that has a known range, then which of torch's symbols each name is."""
    used = symbols(specs)
    return [range_line(names.get(s, s), ranges[s]) for s in used if s in ranges] + torch_name_lines(used, names)


def place(line: int, path: str | None, here: str | None) -> str:
    """``line 10`` in the hovered file ``here``; ``blocks.py:10`` (the path from the
    hovered file's folder, when below it) in another of the user's files, as the CLI
    names them: a bare number would point at the hovered file's line."""
    if path is None or here is None or os.path.realpath(path) == os.path.realpath(here):
        return f"line {line}"
    shown = os.path.relpath(os.path.realpath(path), os.path.dirname(os.path.realpath(here)))
    if shown.startswith(os.pardir):
        shown = os.path.basename(path)
    return f"{shown}:{line}"


def spec_rows(specs: Sequence[Spec], *, with_lines: bool = False, names: Names = _NO_NAMES, here: str | None = None) -> list[str]:
    """Aligned rows: torch's text, the value, and optionally the source line (with its
    file when it is not ``here``, the hovered file); repeated layers' specs as one row
    with a count (``core/model/repeated.py``)."""
    rows = repeated.group(specs)
    cells = [[spec_text(r.spec), value_text(r.spec, names)] for r in rows]
    if with_lines:
        for row, r in zip(cells, rows, strict=True):
            row.append(place(r.spec.source.line, r.spec.source.path, here) if r.spec.source is not None else "")
    for row, r in zip(cells, rows, strict=True):
        row.append(f"×{r.count}" if r.count > 1 else "")
    if not cells:
        return []
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]


def specs_block(m: Markup, specs: Sequence[Spec], ranges: Ranges, names: Names = _NO_NAMES) -> str:
    """A table of some specs, with the ranges of the symbols they use."""
    lines = spec_rows(specs, names=names)
    extra = range_lines(specs, ranges, names)
    if extra:
        lines += ["", *extra]
    return m.block(lines)


def section(m: Markup, title: str, specs: Sequence[Spec], ranges: Ranges, note: str = "", names: Names = _NO_NAMES) -> str:
    """A title (already written in ``m``), an optional note, and the specs' table."""
    parts = [title]
    if note:
        parts.append(note)
    if specs:
        parts.append(specs_block(m, specs, ranges, names))
    return "\n\n".join(parts)


def signature_block(m: Markup, sig: Signature, here: str | None = None) -> str:
    """The whole signature in torch's order, ``# inputs`` / ``# outputs`` as torch prints it."""
    inputs = spec_rows(sig.inputs, with_lines=True, names=sig.dim_names, here=here)
    outputs = spec_rows(sig.outputs, with_lines=True, names=sig.dim_names, here=here)
    lines = ["# inputs", *inputs, "", "# outputs", *outputs]
    if sig.ranges:
        lines += ["", "# ranges", *(range_line(sig.dim_names.get(s, s), r) for s, r in sig.ranges.items())]
        lines += torch_name_lines(sig.ranges, sig.dim_names)
    return m.block(lines)


def target_title(m: Markup, target: TargetResult) -> str:
    if target.status == "ok":
        took = f" in {target.export_ms:.0f} ms" if target.export_ms is not None else ""
        ran = f" · {target.run.describe()}" if target.run is not None else ""
        return f"{m.bold(target.name)} · export ok{took}{ran}"
    took = f" after {target.export_ms:.0f} ms" if target.export_ms is not None else ""
    return f"{m.bold(target.name)} · export {target.status}{took}"


def lowering_text(m: Markup, lowering: Lowering) -> str:
    """``Lowers to ONNX (opset 20, 3 nodes, 720 ms), outputs match (max error 2.4e-07)``
    (ExecuTorch: delegation coverage, .pte size and planned memory in the parentheses),
    then each compared output with its error and tolerance."""
    line = lowering.describe()
    text = line[0].upper() + line[1:]
    rows = [f"{o.name}  {o.dtype}  " + _compared(o) + ("" if o.ok else "  DIFFERS") for o in lowering.outputs]
    if lowering.fallback_ops:
        text += "\n\nOn portable CPU kernels: " + ", ".join(m.code(op) for op in lowering.fallback_ops)
    return text + ("\n\n" + m.block(rows) if rows else "")


def _compared(o: OutputComparison) -> str:
    """What was compared of one output: the errors, or why only its shape or nothing."""
    if o.compared != "values" or o.note:
        return o.note
    if not o.shape_ok:
        return "shape differs"
    return f"max abs {o.max_abs:.3g}  max rel {o.max_rel:.3g}  (atol {o.atol:g}, rtol {o.rtol:g})"


def diagnostic_text(m: Markup, d: Diagnostic, here: str | None = None) -> str:
    """A diagnostic's code and line in bold (with its file when it is not ``here``),
    its first line as a paragraph, the rest as a block."""
    first, _, rest = d.message.partition("\n")
    text = f"{m.bold(m.code(d.code))} {place(d.line, d.path, here)}: {first}"
    more = [line.rstrip() for line in rest.splitlines()]
    while more and not more[-1]:
        more.pop()
    if more:
        text += "\n\n" + m.block(more)
    return text


def weights_text(target: TargetResult) -> str | None:
    """Which weights the export was made from, and why when exportlens chose."""
    if target.weights is None:
        return None
    if target.weights == "fake":
        text = "Built with fake weights: shapes and dtypes without values (the export never reads them)."
    else:
        text = "Built with real weights."
    return f"{text} {target.weights_note[0].upper()}{target.weights_note[1:]}." if target.weights_note else text


def target_hover(m: Markup, target: TargetResult, errors: Sequence[Diagnostic], here: str | None = None) -> str:
    """The target line's hover in the file ``here``: status and time, the weights,
    the whole signature or the errors."""
    parts = [target_title(m, target)]
    weights = weights_text(target)
    if weights:
        parts.append(weights)
    parts.extend(lowering_text(m, low) for low in target.lowerings)
    if target.signature is not None:
        parts.append(signature_block(m, target.signature, here))
    elif target.status == "ok":
        parts.append("No signature was recorded for this target.")
    parts.extend(diagnostic_text(m, d, here) for d in errors)
    return "\n\n".join(parts)


def join_sections(m: Markup, sections: Sequence[str]) -> str:
    """Several targets' views of one place, separated by rules."""
    return f"\n\n{m.rule()}\n\n".join(sections)
