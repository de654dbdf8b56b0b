"""An example input outside its ``Dim``'s range (``Dim("batch", min=4, max=64)``,
an example of batch 2).

torch refuses it before tracing, with ``2 not in range [4, 64]``: no frame, no name.
The job knows both sides -- the declared ``dynamic_shapes`` and the example inputs --
so it finds the dimension: which ``Dim`` has that range, and which input's size
(``x.shape[0]``) is the value. The diagnostic then stands at the ``Dim(...)``
declaration and names both; the example's line is its related location.
Runs in the job process (it reads the live inputs and ``Dim`` objects) but imports
no torch itself.
"""

from __future__ import annotations

import inspect
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from exportlens.core.model.results import Diagnostic, Related
from exportlens.core.model.signature import SourceLine
from exportlens.core.source.sourcemap import SourceIndex
from exportlens.core.source.spans import statement_at

if TYPE_CHECKING:
    from exportlens.core.export.targets import Candidate

_OUT_OF_RANGE = re.compile(r"^\s*(-?\d+) not in range \[(-?\w+), (-?\w+)\]", re.M)


@dataclass(frozen=True)
class Outside:
    """One example dimension outside its declared range."""

    dim: str  # the Dim's name
    expression: str  # the example's dimension as Python: ``x.shape[0]``, ``inputs["ids"].shape[1]``
    size: int
    low: int | None  # the declared range; None: unbounded on that side
    high: int | None
    keyword: bool  # the input came from the example kwargs


def parse(message: str) -> tuple[int, int | None, int | None] | None:
    """``(value, min, max)`` from torch's ``2 not in range [4, 64]``; None otherwise."""
    m = _OUT_OF_RANGE.search(message)
    if m is None:
        return None
    return int(m.group(1)), _bound(m.group(2)), _bound(m.group(3))


def _bound(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None  # int_oo, -int_oo, inf


def outside(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None, dynamic_shapes: Any, message: str) -> list[Outside]:
    """The example dimensions torch's ``message`` is about: declared with a ``Dim``
    whose range is the message's, and of the message's size."""
    parsed = parse(message)
    if parsed is None or dynamic_shapes is None:
        return []
    value, low, high = parsed
    found: list[Outside] = []
    for expression, size, dim, keyword in _dimensions(module, args, kwargs or {}, dynamic_shapes):
        dim_low, dim_high = _range_of(dim)
        if size == value and (low is None or dim_low == low) and (high is None or dim_high == high):
            found.append(Outside(str(dim.__name__), expression, size, dim_low, dim_high, keyword))
    return found


def _range_of(dim: Any) -> tuple[int | None, int | None]:
    return _bound(str(getattr(dim, "min", ""))), _bound(str(getattr(dim, "max", "")))


def _is_dim(spec: Any) -> bool:
    """A named ``Dim`` (not ``Dim.AUTO``/``Dim.DYNAMIC``, not a derived ``2 * batch``)."""
    return isinstance(getattr(spec, "__name__", None), str) and hasattr(spec, "min") and hasattr(spec, "max") and not hasattr(spec, "fn")


def _inputs(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[str, Any, bool]]:
    """``(name, value, from kwargs)`` of each example input, named as ``forward`` names them."""
    try:
        bound = inspect.signature(module.forward).bind(*args, **kwargs)
        names = list(bound.arguments)
    except (TypeError, ValueError):
        names = [f"args[{i}]" for i in range(len(args))] + list(kwargs)
    values = [*args, *kwargs.values()]
    keyword = [False] * len(args) + [True] * len(kwargs)
    return list(zip(names, values, keyword, strict=False))


def _dimensions(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], shapes: Any) -> Iterator[tuple[str, int, Any, bool]]:
    """``(expression, example size, Dim, from kwargs)`` of every dimension a named Dim declares."""
    inputs = _inputs(module, args, kwargs)
    if isinstance(shapes, dict):
        pairs = [(name, value, shapes[name], keyword) for name, value, keyword in inputs if name in shapes]
    elif isinstance(shapes, (tuple, list)):
        pairs = [(name, value, spec, keyword) for (name, value, keyword), spec in zip(inputs, shapes, strict=False)]
    else:
        return
    for name, value, spec, keyword in pairs:
        for expression, size, dim in _walk(name, value, spec):
            yield expression, size, dim, keyword


def _walk(expression: str, value: Any, spec: Any) -> Iterator[tuple[str, int, Any]]:
    shape = getattr(value, "shape", None)
    if shape is not None and not isinstance(value, (dict, list, tuple)):
        per_dim = spec.items() if isinstance(spec, dict) else enumerate(spec) if isinstance(spec, (tuple, list)) else ()
        for axis, dim in per_dim:
            if _is_dim(dim) and isinstance(axis, int) and -len(shape) <= axis < len(shape):
                yield f"{expression}.shape[{axis}]", int(shape[axis]), dim
    elif isinstance(value, dict) and isinstance(spec, dict):
        for key, item in value.items():
            if key in spec:
                yield from _walk(f"{expression}[{key!r}]", item, spec[key])
    elif isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
        for i, (item, sub) in enumerate(zip(value, spec, strict=False)):
            yield from _walk(f"{expression}[{i}]", item, sub)


def message(found: Outside) -> str:
    """What the diagnostic says: the dimension, its size, the range, and the ways out."""
    shown = f"[{'-inf' if found.low is None else found.low}, {'inf' if found.high is None else found.high}]"
    head = f"the example input's `{found.expression}` is {found.size}, outside the range {shown} declared for `{found.dim}`"
    if found.size in (0, 1):
        # export specialises sizes 0 and 1: widening the range to them would not keep it dynamic
        fix = f"give an example input with `{found.expression}` in {shown} (sizes 0 and 1 are specialised by export)"
    elif found.low is not None and found.size < found.low:
        fix = f"give an example input with `{found.expression}` in {shown}, or lower the Dim's `min` to {found.size}"
    else:
        fix = f"give an example input with `{found.expression}` in {shown}, or raise the Dim's `max` to {found.size}"
    return f"{head}: {fix}."


def diagnose(found: list[Outside], candidate: Candidate, index: SourceIndex, extent: tuple[int, int] | None) -> list[Diagnostic]:
    """One ``constraint-violation`` per dimension, at its ``Dim(...)`` declaration
    (the target's own, ``extent``, first), the example's line as related; nothing
    when a declaration cannot be found (torch's message at its usual place then)."""
    out: list[Diagnostic] = []
    example = _example_line(candidate, index, extent, keyword=any(f.keyword for f in found))
    for f in found:
        declared = index.dim_declaration(f.dim, extent)
        if declared is None:
            return []
        related = (Related(index.origin or os.path.realpath(index.path), example.line, f"the example input: `{f.expression}` is {f.size}", example.column),) if example else ()
        out.append(Diagnostic.at("constraint-violation", message(f), declared, candidate.decl.name, related))
    return out


def _example_line(candidate: Candidate, index: SourceIndex, extent: tuple[int, int] | None, keyword: bool) -> SourceLine | None:
    """Where the example inputs are written: the ``example_args``/``example_kwargs``
    global, the decorator's argument, or the factory's ``return``."""
    key = "example_kwargs" if keyword else "example_args"
    if candidate.decl.form == "globals":
        return index.global_assignments.get(key) or index.global_assignments.get("example_args")
    factory = next((f for f in index.all_functions() if f.where.line == candidate.where.line), None)
    if factory is not None and factory.returns:
        return factory.returns[-1]
    if extent is not None:  # a decorated class: the decorator's example_args=...
        for line in range(extent[0], extent[1] + 1):
            if key in index.line_text(line):
                return statement_at(index, line)
    return None
