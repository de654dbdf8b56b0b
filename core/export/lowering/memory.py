"""What memory a lowered program needs, and which ``Dim``s decide it.

ExecuTorch plans a program's memory ahead of time, for the largest shapes the program
allows: with ``Dim("height", max=1024)`` its arenas hold every tensor at height 1024,
whatever input the device gives it, and the runtime allocates them when the method
loads. XNNPACK does the same for the values inside its delegate: it sizes its
workspace for the largest shapes its graph allows (measured on pytorch/examples'
super-resolution net with ``batch`` up to 32 and ``height``/``width`` up to 1024: a
plan of 1.1 GB, and a run on a 2x1x32x32 input that peaks at 9.2 GB). So what a
deployment needs is decided at the ``Dim`` declarations, not at the example input,
and is knowable before anything runs:

- ``planned``: the memory plan's arenas, ExecuTorch's own number;
- ``workspace``: the largest value computed inside the XNNPACK delegate at the
  ``Dim``s' maxima, which its workspace holds at least;
- the ``Dim``s whose maxima make that value as large as it is, and their maxima.

``Need`` carries them. ``weigh`` puts them in the lowering's record and says, at the
``Dim`` declaration, when they exceed the budget (``executorch-over-budget``);
``over_cap_finding`` when they exceed the job's memory cap (``executorch-memory``: not
run, it would be killed). ``executorch.py`` calls both. Runs in the job process (torch).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import psutil

from exportlens.core.export.explain import target_extent
from exportlens.core.export.lowering import fx_nodes
from exportlens.core.model.lowering import Lowering, size_text
from exportlens.core.model.results import Diagnostic, Related
from exportlens.core.model.signature import SourceLine

if TYPE_CHECKING:
    from exportlens.core.export.lowering.destination import Subject

MEMORY = "lowering/executorch-memory"
OVER_BUDGET = "lowering/executorch-over-budget"


@dataclass(frozen=True)
class Value:
    """One value of the program at the ``Dim``s' maxima."""

    op: str  # the op that computes it: ``aten::convolution``
    shape: tuple[int, ...]  # at the maxima
    dtype: str  # ``float32``
    nbytes: int
    symbols: tuple[str, ...]  # torch's symbols its shape depends on (``s77``)
    where: SourceLine | None  # the user's line that computes it


@dataclass(frozen=True)
class Need:
    """What the program needs to run on a device, at the ``Dim``s' maxima."""

    planned: int | None  # ExecuTorch's memory plan, bytes; None: not made (fake weights a pass could not plan)
    largest: Value | None  # the largest value inside the XNNPACK delegate; None: nothing delegated
    # (the Dim's name, its max): those the largest value's shape depends on, in its
    # shape's order; else every named Dim with a maximum (they size the plan).
    dims: tuple[tuple[str, int], ...]

    @property
    def workspace(self) -> int:
        return self.largest.nbytes if self.largest is not None else 0

    @property
    def total(self) -> int:
        """What it needs at least: the plan (when made) and the workspace."""
        return (self.planned or 0) + self.workspace


def need(edge: Any, planned: int | None, dim_names: dict[str, str], line_of: Callable[[Any], SourceLine | None]) -> Need:
    """The program's ``Need``: ``edge``, its edge program (delegates in it), ``planned``
    its plan's bytes, ``dim_names`` torch's symbols' ``Dim`` names (``{"s77": "batch"}``),
    ``line_of`` a node's user line."""
    ranges = _ranges(edge)
    largest: Value | None = None
    for node in _delegated_nodes(edge):
        value = _value(node, ranges)
        if value is not None and (largest is None or value.nbytes > largest.nbytes):
            largest = replace(value, where=line_of(node))
    dims = _named(largest.symbols if largest is not None else (), dim_names, ranges)
    if not dims:  # nothing delegated, or a value no Dim sizes: the plan is sized at every Dim's maximum
        dims = _named(tuple(dim_names), dim_names, ranges)
    return Need(planned, largest, tuple(dims))


def _named(symbols: tuple[str, ...], dim_names: dict[str, str], ranges: dict[Any, Any]) -> list[tuple[str, int]]:
    """``(Dim name, max)`` of the symbols a ``Dim`` named and bounded, once each, in order."""
    dims: list[tuple[str, int]] = []
    for symbol in symbols:
        name = dim_names.get(symbol)
        upper = _upper_of_symbol(symbol, ranges)
        if name and upper is not None and name not in (n for n, _ in dims):
            dims.append((name, upper))
    return dims


def _ranges(edge: Any) -> dict[Any, Any]:
    try:
        return dict(edge.range_constraints)
    except Exception:  # noqa: BLE001 - no ranges: every symbolic size is unknown
        return {}


def _delegated_nodes(edge: Any) -> list[Any]:
    """The nodes computing inside each XNNPACK delegate of ``edge`` (its branches too)."""
    out: list[Any] = []
    for module in fx_nodes.graph_modules(edge.graph_module):
        for node in module.graph.nodes:
            if node.op == "call_function" and getattr(node.target, "__name__", "") == "executorch_call_delegate":
                lowered = getattr(module, node.args[0].target, None)
                original = getattr(lowered, "original_module", None)
                if original is not None:
                    out += [n for n in original.graph.nodes if n.op == "call_function"]
    return out


def _value(node: Any, ranges: dict[Any, Any]) -> Value | None:
    """``node``'s tensor at the maxima (the largest, for an op of several outputs);
    None when it makes no tensor whose every size has a finite maximum."""
    import torch

    val = node.meta.get("val")
    tensors = [v for v in (val if isinstance(val, (tuple, list)) else (val,)) if isinstance(v, torch.Tensor)]
    best: Value | None = None
    for t in tensors:
        shape: list[int] = []
        symbols: list[str] = []
        for size in t.shape:
            upper = _upper(size, ranges)
            if upper is None:
                break
            shape.append(upper)
            symbols += [str(s) for s in _free_symbols(size)]
        if len(shape) != t.dim():
            continue  # a size without a maximum (an unbacked one): this tensor is not counted
        nbytes = math.prod(shape) * t.element_size()
        if best is None or nbytes > best.nbytes:
            op = (
                fx_nodes.op_name(node.target)
                if hasattr(node.target, "_schema")
                else str(getattr(node.target, "__name__", node.target))
            )
            best = Value(
                op, tuple(shape), str(t.dtype).removeprefix("torch."), nbytes, tuple(dict.fromkeys(symbols)), None
            )
    return best


def _free_symbols(size: Any) -> list[Any]:
    expr = getattr(getattr(size, "node", None), "expr", None)
    return sorted(getattr(expr, "free_symbols", ()) or (), key=str)


def _upper(size: Any, ranges: dict[Any, Any]) -> int | None:
    """A size's largest value: the number itself, or its expression bounded by the ranges."""
    if isinstance(size, int):
        return size
    expr = getattr(getattr(size, "node", None), "expr", None)
    if expr is None:
        return None
    try:
        from torch.utils._sympy.value_ranges import bound_sympy

        upper = bound_sympy(expr, ranges).upper
        value = int(upper)
    except Exception:  # noqa: BLE001 - unbounded (int_oo) or not a number: unknown
        return None
    return value if value >= 0 else None


def _upper_of_symbol(name: str, ranges: dict[Any, Any]) -> int | None:
    for symbol, vr in ranges.items():
        if str(symbol) == name:
            try:
                return int(vr.upper)
            except Exception:  # noqa: BLE001 - int_oo
                return None
    return None


def dims_text(found: Need) -> str:
    """```batch` up to 32, `height` up to 1024``."""
    return ", ".join(f"`{name}` up to {upper}" for name, upper in found.dims)


def what_it_needs(found: Need, file: str) -> str:
    """The sentence of facts: ``its memory plan is 1.1 GB and XNNPACK holds at least
    8.0 GB for its largest value, `aten::convolution` of [32, 64, 1024, 1024] float32
    (sr.py:22)``; ``file``: the target's file, where a line without a path is."""
    text = f"its memory plan is {size_text(found.planned)}" if found.planned is not None else "its memory plan was not made"
    if found.largest is not None:
        v = found.largest
        at = f" ({os.path.basename(v.where.path or file)}:{v.where.line})" if v.where is not None else ""
        text += f" and XNNPACK holds at least {size_text(v.nbytes)} for its largest value, `{v.op}` of {list(v.shape)} {v.dtype}{at}"
    return text


def where_decided(found: Need, subject: Any) -> tuple[SourceLine, tuple[Related, ...], bool]:
    """Where to say it: the first deciding ``Dim``'s declaration (the others' as
    related locations), else the ``dynamic_shapes`` declaration, else the target;
    and whether that is a ``Dim``'s (or the shapes') line."""
    from exportlens.core.export import shapes_spec

    loaded = subject.loaded
    index = loaded.index
    extent = target_extent(subject.candidate, index)
    path = os.path.realpath(loaded.path)
    declared = [(name, index.dim_declaration(name, extent)) for name, _ in found.dims]
    lines = [(name, d) for name, d in declared if d is not None]
    if lines:
        first = lines[0][1]
        related = tuple(Related(path, d.line, f"`{name}` is declared here", d.column) for name, d in lines[1:])
        return first, related, True
    shapes = shapes_spec.declaration(index, extent)
    if shapes is not None and found.dims:
        return shapes, (), True
    return subject.candidate.where, (), False


def over_cap(found: Need, memory_mb: int) -> bool:
    """Whether the program needs more than the job's memory cap, which the job's own
    memory (torch, the model) comes on top of: running it would only be killed. Said
    from the program alone, so a fresh export always says the same."""
    return found.total > memory_mb * 1024 * 1024


def resident_bytes() -> int:
    """This process's resident memory now (psutil, every platform; 0 should it fail)."""
    try:
        return int(psutil.Process().memory_info().rss)
    except psutil.Error:
        return 0


def reset_peak() -> bool:
    """Start measuring this process's resident peak afresh (``clear_refs`` 5 resets
    ``VmHWM``, Linux 4.0+); False where it cannot. Linux's own files: psutil has no
    peak to reset (nor any peak on macOS)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_bytes() -> int | None:
    """This process's resident peak (``VmHWM``) since the last ``reset_peak``."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


# -- what the lowering says of it ----------------------------------------------------

# What running the program needs and where that is decided (``Lowered.needs``):
# (the facts, where, related Dims, whether at the Dims).
Place = tuple[str, SourceLine, tuple[Related, ...], bool]


def measure(edge_program: Any, subject: Subject) -> Need | None:
    """What the program needs besides its plan (``need``), or None when that
    could not be worked out: extra facts, never a reason to lose the lowering."""
    try:
        return need(edge_program, None, subject.signature.dim_names if subject.signature else {}, subject.line_of)
    except Exception:  # noqa: BLE001 - a graph the estimate does not understand: the plan alone is said
        return None


def weigh(record: Lowering, needs: Need | None, planned: int | None, subject: Subject) -> tuple[Lowering, list[Diagnostic], Place | None]:
    """``record`` with its memory, the ``executorch-over-budget`` finding, and what it
    needs with where that is decided (``Lowered.needs``), when known."""
    record = replace(record, planned_memory_bytes=planned, budget_bytes=subject.budget)
    if needs is None:
        return record, [], None
    needs = replace(needs, planned=planned)
    try:
        where, related, decided = where_decided(needs, subject)
    except Exception:  # noqa: BLE001 - the Dims not found in the source: said at the target
        where, related, decided = subject.candidate.where, (), False
    what = what_it_needs(needs, subject.loaded.path) + (f", at {dims_text(needs)}" if needs.dims else "")
    record = replace(record, workspace_bytes=needs.workspace if needs.largest is not None else None, memory_dims=dims_text(needs))
    return record, _over_budget(needs, subject, where, related, what), (what, where, related, decided)


def _over_cap_message(needs: Need, memory_mb: int, what: str) -> str:
    """Why the program was not run: what it needs, where, and the ways out."""
    at = "the largest shapes its `Dim`s allow" if needs.dims else "its shapes"
    ways = "lower those `Dim`s' `max` to the largest input you deploy, or raise `memory_mb` to run it here" if needs.dims else "raise `memory_mb` to run it here"
    return (
        f"the ExecuTorch program needs at least {size_text(needs.total)} to run, more than this job's memory cap of {memory_mb} MB (`memory_mb`), "
        f"so it was not run: {what}. ExecuTorch plans its memory, and XNNPACK sizes its workspace, for {at}, "
        f"whatever input the device gives it: {ways}"
    )


def _over_budget(needs: Need, subject: Subject, where: SourceLine, related: tuple[Related, ...], what: str) -> list[Diagnostic]:
    """``executorch-over-budget`` when the program needs more than its budget."""
    if subject.budget is None or needs.total <= subject.budget:
        return []
    message = (
        f"the ExecuTorch program needs {'at least ' if needs.largest is not None or needs.planned is None else ''}{size_text(needs.total)} to run, over its memory budget of {size_text(subject.budget)} (`memory_budget`): {what}"
        + (". Lower those `Dim`s' `max`, or raise the budget" if needs.dims else ". Make its tensors smaller, or raise the budget")
    )
    return [Diagnostic.at(OVER_BUDGET, message, where, subject.name, related)]


def over_cap_finding(needs: Need, subject: Subject, place: Place) -> tuple[str, Diagnostic] | None:
    """When the program needs more than the job's memory cap (``over_cap``): why it is
    not run (the record's ``skipped``) and the ``executorch-memory`` warning, where it
    is decided; else None."""
    if subject.memory_mb is None or not over_cap(needs, subject.memory_mb):
        return None
    what, where, related, _ = place
    skipped = f"it needs at least {size_text(needs.total)} to run, more than this job's memory cap of {subject.memory_mb} MB (`memory_mb`)"
    return skipped, Diagnostic.at(MEMORY, _over_cap_message(needs, subject.memory_mb, what), where, subject.name, related)
