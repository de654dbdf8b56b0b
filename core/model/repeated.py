"""Specs of repeated layers, grouped for reading. Torch-free.

A 70B Llama's signature lists 723 parameters: 80 layers of the same nine. Listed one
by one, its hover is 733 lines. For people (hover, ``show``, the text report) the
specs that differ only in their layer index -- the same kind, dtype, shape, device and
source line, a target that differs in its numeric path parts -- are one row::

    p_model_layers_{0..79}_mlp_up_proj_weight  PARAMETER  model.layers.{0..79}.mlp.up_proj.weight  bfloat16[28672, 8192]  ×80

at the place of the first of them. Machines (JSON, the snapshot, SARIF) keep every
spec: this module is only ever used to print.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from exportlens.core.model.signature import InputSpec, OutputSpec

Spec = InputSpec | OutputSpec

# A group must be at least this large: two or three blocks read fine one by one, and
# tiny test models keep their rows.
MIN_GROUP = 4
_INDEX = re.compile(r"(?<![A-Za-z0-9])\d+(?![A-Za-z0-9])")


@dataclass(frozen=True)
class Row:
    """What one printed row stands for: a spec, or ``count`` of them with their
    varying indices written as ranges in ``spec``'s name and target."""

    spec: Spec
    count: int = 1


@functools.lru_cache(maxsize=4096)  # the same specs are grouped for each hover section
def _indices(text: str) -> tuple[str, tuple[int, ...]]:
    """``model.layers.3.mlp`` -> (``model.layers.{}.mlp``, (3,)): the text with its
    separate numbers (path parts, ``_3_`` in a graph name) taken out."""
    numbers = tuple(int(m) for m in _INDEX.findall(text))
    return _INDEX.sub("{}", text), numbers


def pattern(path: str) -> str | None:
    """A module path with its indices taken out (``layers.{}.mlp``); None when it has
    none, so nothing repeats."""
    text, numbers = _indices(path)
    return text if numbers else None


def _ranges(values: Sequence[tuple[int, ...]]) -> list[str]:
    """Each position's values as ``0..79`` (contiguous) or ``0,2,5``."""
    out = []
    for position in zip(*values, strict=True):
        distinct = sorted(set(position))
        if len(distinct) == 1:
            out.append(str(distinct[0]))
        elif distinct == list(range(distinct[0], distinct[-1] + 1)):
            out.append(f"{{{distinct[0]}..{distinct[-1]}}}")
        else:
            out.append("{" + ",".join(map(str, distinct)) + "}")
    return out


def _fill(pattern: str, parts: list[str]) -> str:
    it = iter(parts)
    return re.sub(r"\{\}", lambda _: next(it), pattern)


def group(specs: Sequence[Spec]) -> list[Row]:
    """The rows to print for ``specs``, in their order: a group at its first member."""
    keyed: dict[tuple[object, ...], list[int]] = {}
    keys: list[tuple[object, ...] | None] = []
    for i, spec in enumerate(specs):
        target_pattern, numbers = _indices(spec.target or "")
        if not numbers:
            keys.append(None)
            continue
        meta = spec.arg.meta
        key: tuple[object, ...] = (
            type(spec).__name__, spec.kind, spec.arg.kind, target_pattern, getattr(spec, "persistent", None),
            (meta.dtype, meta.shape, meta.device) if meta is not None else None,
            (spec.source.path, spec.source.line) if spec.source is not None else None,
        )
        keys.append(key)
        keyed.setdefault(key, []).append(i)
    rows: list[Row] = []
    done: set[int] = set()
    for i, spec in enumerate(specs):
        if i in done:
            continue
        found = keys[i]
        members = keyed.get(found, [i]) if found is not None else [i]
        if len(members) < MIN_GROUP:
            rows.append(Row(spec))
            continue
        done.update(members)
        rows.append(Row(_merged([specs[j] for j in members]), len(members)))
    return rows


def _merged(members: list[Spec]) -> Spec:
    """The first member with its varying indices written as ranges, in the target and,
    when it follows the target (``p_model_layers_3_...``), in the graph name."""
    first = members[0]
    target_pattern, _ = _indices(first.target or "")
    target_numbers = [_indices(m.target or "")[1] for m in members]
    parts = _ranges(target_numbers)
    name_pattern, _ = _indices(first.arg.name)
    name_numbers = [_indices(m.arg.name)[1] for m in members]
    if name_numbers == target_numbers:
        name = _fill(name_pattern, parts)
    else:  # node names (``index_put_3``) count on their own
        name = f"{first.arg.name}…{members[-1].arg.name}"
    return replace(first, target=_fill(target_pattern, parts), arg=replace(first.arg, name=name))
