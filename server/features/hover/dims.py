"""Hover on a ``Dim(...)`` declaration: what torch made of it.

``batch = Dim("batch", min=2, max=64)`` shows, for each target whose inputs use it,
the range torch recorded for the symbol it became (``batch ∈ [2, 64]``, which can be
narrower than declared: torch refines ranges from the code), torch's name for it
(``s77``, the one its messages use) and the inputs that carry it. When torch
specialised it instead (a ``constraint-violation`` at the declaration), the hover
names the line that did it and the diagnostic.

Which targets a declaration belongs to: a ``Dim`` declared inside a target's own
lines (a factory's body) is that target's; one declared at module level belongs to
every target that has no declaration of that name of its own. A symbol is the
``Dim``'s when ``Signature.dim_names`` names it so.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from exportlens.core.model.results import Diagnostic, Related, TargetResult
from exportlens.core.model.signature import InputSpec, Signature, SourceLine
from exportlens.server.features.hover import text as md
from exportlens.server.markup import Markup
from exportlens.server.positions import LineSpan

if TYPE_CHECKING:
    from exportlens.server.features.hover.collector import Anchors


def add_declarations(b: Anchors) -> None:
    index, m = b.source, b.markup
    extents = {t.name: _extent(b, t) for t in b.result.targets}
    for name, wheres in index.dim_all.items():
        for where in wheres:
            spans = _spans(b, name, where)
            if not spans:
                continue
            specialised = _specialised(b, name, where)
            for target in b.result.targets:
                if not _owns(extents, target.name, name, where, wheres):
                    continue
                text = _target_text(m, name, target)
                if text is None and target.signature is None and not any(d.target in (None, target.name) for d in specialised):
                    # Failed for another reason: say why the hover has no range.
                    text = f"{m.bold(f'Dim {m.code(name)}')} · {m.code(target.name)} · export {target.status}: torch recorded no range"
                if text is not None:
                    b.add(spans, target.name, text)
            for d in specialised:
                b.add(spans, d.target or "", _specialised_text(b, name, d))


def _extent(b: Anchors, target: TargetResult) -> tuple[int, int] | None:
    """The lines of the function or class the target is declared at, decorators included."""
    for f in b.source.all_functions():
        if f.where.line == target.line:
            return f.first_line, f.last_line
    for c in b.classes:
        if c.where.line == target.line:
            return c.first_line, c.last_line
    return None


def _within(extent: tuple[int, int] | None, line: int) -> bool:
    return extent is not None and extent[0] <= line <= extent[1]


def _owns(extents: dict[str, tuple[int, int] | None], target: str, name: str, where: SourceLine, wheres: list[SourceLine]) -> bool:
    if _within(extents.get(target), where.line):
        return True
    if any(_within(extents.get(target), w.line) for w in wheres):
        return False  # the target declares its own Dim of that name
    return not any(_within(e, where.line) for e in extents.values())  # another target's own


def _spans(b: Anchors, name: str, where: SourceLine) -> list[LineSpan]:
    spans = b.text.spans(where)
    for variable, dim in b.source.dim_variables.items():
        assigned = b.source.global_assignments.get(variable)
        if dim == name and assigned is not None and assigned.line == where.line:
            spans += b.text.whole_line(where.line)  # `batch = Dim(...)`: the variable too
    return spans


def _uses(sig: Signature, symbols: list[str]) -> list[InputSpec]:
    return [s for s in sig.inputs if s.kind == "USER_INPUT" and set(md.symbols([s])) & set(symbols)]


def _target_text(m: Markup, name: str, target: TargetResult) -> str | None:
    sig = target.signature
    if sig is None:
        return None
    symbols = [s for s, n in sig.dim_names.items() if n == name]
    if not symbols:
        return None  # this target's inputs do not use it (or torch kept no names)
    lines = [md.range_line(name, sig.ranges[s]) for s in symbols if s in sig.ranges]
    lines += md.torch_name_lines(symbols, sig.dim_names)
    uses = _uses(sig, symbols)
    if uses:
        lines += ["", *md.spec_rows(uses, names=sig.dim_names)]
    return "\n\n".join([f"{m.bold(f'Dim {m.code(name)}')} · {m.code(target.name)}", m.block(lines)])


def _specialised(b: Anchors, name: str, where: SourceLine) -> list[Diagnostic]:
    """The constraint violations at this declaration: at its very column, or on its
    line naming it (two Dims on one line)."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    found = []
    for d in b.result.diagnostics:
        if d.code != "constraint-violation" or d.path is not None or d.line != where.line:
            continue
        if d.column == where.column or word.search(d.message.partition("\n")[0]):
            found.append(d)
    return found


def _related_text(b: Anchors, r: Related) -> str:
    here = os.path.realpath(r.path) == os.path.realpath(b.path)
    place = md.place(r.line, r.path, b.path)
    code = b.source.line_text(r.line).strip() if here else ""
    return f"{place}" + (f" · {b.markup.code(code)}" if code else "") + f" · {r.message}"


def _specialised_text(b: Anchors, name: str, d: Diagnostic) -> str:
    m = b.markup
    target = f" · {m.code(d.target)}" if d.target else ""
    examples = [_related_text(b, r) for r in d.related if r.message.startswith("the example input")]
    if examples:  # not specialised: the example misses the declared range
        parts = [f"{m.bold(f'Dim {m.code(name)}')}{target} · the example input is outside its range", "\n".join(f"- {line}" for line in examples)]
        return "\n\n".join([*parts, md.diagnostic_text(m, d, b.path)])
    parts = [f"{m.bold(f'Dim {m.code(name)}')}{target} · torch specialised it"]
    lines = [_related_text(b, r) for r in d.related if "specialis" in r.message]
    if lines:
        parts.append("Specialised by:\n\n" + "\n".join(f"- {line}" for line in lines))
    else:
        parts.append("torch's message does not say which line specialised it.")
    parts.append(md.diagnostic_text(m, d, b.path))
    return "\n\n".join(parts)
