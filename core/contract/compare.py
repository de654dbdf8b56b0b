"""The rules: what changed between a recorded signature and a new one, and whether a
deployed runtime built for the old program would reject the new one.

Breaking: an input or output added, removed or reordered; a kind, argument type,
dtype, device, ``persistent`` flag or constant that changed; a rank or a static size
that changed; a dynamic dim made static; a range narrowed (the new range does not
hold the old one). Compatible: a static dim made dynamic with a range that holds the
old size, a range widened, a dim renamed. A runtime feeds inputs and reads outputs
by position, so user inputs are matched by name (the ``forward`` parameter, to tell
a reordering from a change), user outputs by position, and state (parameters,
buffers, constants, mutations) by its target.

A pure function of two ``TargetEntry`` values: no files, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from exportlens.core.contract.snapshot import Dim, Range, SpecEntry, TargetEntry

Side = Literal["input", "output"]

_USER_OUTPUTS = {"USER_OUTPUT", "LOSS_OUTPUT"}
_LABELS = {
    "PARAMETER": "parameter",
    "BUFFER": "buffer",
    "CONSTANT_TENSOR": "constant",
    "CUSTOM_OBJ": "custom object",
    "BUFFER_MUTATION": "buffer mutation",
    "PARAMETER_MUTATION": "parameter mutation",
    "USER_INPUT_MUTATION": "input mutation",
    "GRADIENT_TO_PARAMETER": "gradient of parameter",
    "GRADIENT_TO_USER_INPUT": "gradient of input",
}


@dataclass(frozen=True)
class Change:
    """One difference, about one spec (or the order of a side)."""

    side: Side
    index: int | None  # position in the new signature's inputs/outputs; None: not in it
    breaking: bool
    message: str  # first line: what changed; further lines: why it matters


def compare(old: TargetEntry, new: TargetEntry) -> list[Change]:
    """Every difference between ``old`` (recorded) and ``new``, inputs first."""
    return _side("input", old.inputs, new.inputs, old.ranges, new.ranges) + _side("output", old.outputs, new.outputs, old.ranges, new.ranges)


def _keys(side: Side, specs: tuple[SpecEntry, ...]) -> list[tuple[str, str]]:
    """How each spec is matched across versions (see the module docstring)."""
    keys: list[tuple[str, str]] = []
    counts: dict[str, int] = {}
    for spec in specs:
        if side == "output" and spec.kind in _USER_OUTPUTS:
            group, ident = "output", None
        elif side == "input" and spec.kind == "USER_INPUT":
            group, ident = "input", spec.name
        elif spec.kind == "TOKEN" or spec.target is None:
            group, ident = spec.kind, None
        else:
            group, ident = spec.kind, spec.target
        if ident is None:  # matched by position within its group
            ident = str(counts.get(group, 0))
            counts[group] = counts.get(group, 0) + 1
        key = (group, ident)
        while key in keys:  # a duplicate (a hand-edited file): keep both, apart
            key = (key[0], key[1] + "'")
        keys.append(key)
    return keys


def label(side: Side, key: tuple[str, str]) -> str:
    """``output 0``, ``input `x```, ``parameter `fc.weight```, ``token input 0``."""
    group, ident = key
    if group in ("input", "output"):
        return f"{group} {ident}" if group == "output" else f"input `{ident}`"
    if group in _LABELS:
        return f"{_LABELS[group]} `{ident}`"
    return f"{group.lower().replace('_', ' ')} {side} {ident}"


def _side(side: Side, old: tuple[SpecEntry, ...], new: tuple[SpecEntry, ...], old_ranges: dict[str, Range], new_ranges: dict[str, Range]) -> list[Change]:
    old_keys, new_keys = _keys(side, old), _keys(side, new)
    old_at = {k: i for i, k in enumerate(old_keys)}
    new_at = {k: i for i, k in enumerate(new_keys)}
    changes: list[Change] = []
    for k, i in old_at.items():
        if k not in new_at:
            changes.append(Change(side, None, True, f"{label(side, k)} removed (was {spec_text(old[i])})"))
    for k, i in new_at.items():
        if k not in old_at:
            changes.append(Change(side, i, True, f"{label(side, k)} added: {spec_text(new[i])}"))
    common_old = [k for k in old_keys if k in new_at]
    common_new = [k for k in new_keys if k in old_at]
    if common_old != common_new:
        first = next(k for k, m in zip(common_new, common_old, strict=True) if k != m)
        before, after = (", ".join(label(side, k) for k in keys) for keys in (common_old, common_new))
        changes.append(Change(side, new_at[first], True, f"{side}s reordered: ({before}) -> ({after})"))
    for k in common_new:
        change = _spec_change(side, k, old[old_at[k]], new[new_at[k]], old_ranges, new_ranges, new_at[k])
        if change is not None:
            changes.append(change)
    return changes


def _spec_change(side: Side, key: tuple[str, str], old: SpecEntry, new: SpecEntry, old_ranges: dict[str, Range], new_ranges: dict[str, Range], index: int) -> Change | None:
    breaking: list[str] = []
    compatible: list[str] = []
    for attr, what in (("kind", "kind"), ("arg", "argument type"), ("dtype", "dtype"), ("device", "device"), ("persistent", "persistent"), ("class_fqn", "class")):
        a, b = getattr(old, attr), getattr(new, attr)
        if a != b:
            breaking.append(f"{what} {a} -> {b}")
    if old.arg == new.arg == "constant" and (type(old.value), old.value) != (type(new.value), new.value):
        breaking.append(f"constant {old.value!r} -> {new.value!r}")
    if old.arg == new.arg and old.arg in ("symint", "symfloat", "symbool"):
        moved = isinstance(old.value, str) and old_ranges.get(old.value) != new_ranges.get(str(new.value))
        if old.value != new.value or moved:
            _dim_rule("value", old.value, new.value, old_ranges, new_ranges, breaking, compatible)
    if old.shape != new.shape:
        if old.shape is None or new.shape is None or len(old.shape) != len(new.shape):
            breaking.append(f"rank {_rank(old.shape)} -> {_rank(new.shape)}")
        else:
            for i, (a, b) in enumerate(zip(old.shape, new.shape, strict=True)):
                _dim_rule(f"dim {i}", a, b, old_ranges, new_ranges, breaking, compatible)
    elif side == "input":
        # Same dims; their ranges may still have moved. Said on the inputs only: an
        # output's dims follow from the inputs', and one Dim would be reported on
        # every output that carries it.
        for i, d in enumerate(old.shape or ()):
            if isinstance(d, str) and old_ranges.get(d) != new_ranges.get(d):
                _dim_rule(f"dim {i}", d, d, old_ranges, new_ranges, breaking, compatible)
    if not breaking and not compatible:
        return None
    head = f"{label(side, key)}: {spec_text(old, old_ranges, new_ranges)} -> {spec_text(new, new_ranges, old_ranges)}"
    why = f"breaking: {'; '.join(breaking)}" if breaking else f"compatible: {'; '.join(compatible)}"
    return Change(side, index, bool(breaking), head + "\n" + why)


def _rank(shape: tuple[Dim, ...] | None) -> str:
    return "none" if shape is None else str(len(shape))


def _dim_rule(what: str, a: Dim | object, b: Dim | object, old_ranges: dict[str, Range], new_ranges: dict[str, Range], breaking: list[str], compatible: list[str]) -> None:
    """Classify one dim (or symbolic scalar) going from ``a`` to ``b``."""
    if isinstance(a, int) and isinstance(b, int):
        if a != b:
            breaking.append(f"{what} static {a} -> {b}")
        return
    if isinstance(a, str) and isinstance(b, int):
        breaking.append(f"{what} dynamic `{a}` made static {b}")
        return
    new_range = new_ranges.get(b) if isinstance(b, str) else None
    if isinstance(a, int) and isinstance(b, str):
        if new_range is not None and _holds(new_range, (a, a)):
            compatible.append(f"{what} static {a} made dynamic `{b}` {range_text(new_range)}")
        else:
            breaking.append(f"{what} static {a} made dynamic `{b}` {range_text(new_range)}, which does not hold {a}")
        return
    if not (isinstance(a, str) and isinstance(b, str)):
        if a != b:
            breaking.append(f"{what} {a!r} -> {b!r}")
        return
    old_range = old_ranges.get(a)
    if old_range is None or new_range is None:
        if a != b:  # an expression without a known range: only the text can tell
            breaking.append(f"{what} `{a}` -> `{b}`")
        return
    renamed = f"renamed `{a}` -> `{b}`" if a != b else ""
    if old_range == new_range:
        if renamed:
            compatible.append(f"{what} {renamed}")
    elif _holds(new_range, old_range):
        compatible.append(f"{what} range widened {range_text(old_range)} -> {range_text(new_range)}" + (f", {renamed}" if renamed else ""))
    else:
        breaking.append(f"{what} range narrowed {range_text(old_range)} -> {range_text(new_range)}" + (f", {renamed}" if renamed else ""))


def _holds(outer: Range, inner: Range) -> bool:
    """Whether every size in ``inner`` is in ``outer`` (None: unbounded)."""
    lo_ok = outer[0] is None or (inner[0] is not None and inner[0] >= outer[0])
    hi_ok = outer[1] is None or (inner[1] is not None and inner[1] <= outer[1])
    return lo_ok and hi_ok


def range_text(r: Range | None) -> str:
    if r is None:
        return "[?]"
    return f"[{'-inf' if r[0] is None else r[0]}, {'inf' if r[1] is None else r[1]}]"


def spec_text(spec: SpecEntry, ranges: dict[str, Range] | None = None, other: dict[str, Range] | None = None) -> str:
    """``float32[batch, 4]`` (with the device when not cpu); the value of a constant,
    the symbol of a symbolic scalar. With ``other``, the ranges of symbols whose
    range differs between the two sides are appended (``batch in [1, 32]``)."""
    if spec.shape is not None or spec.dtype is not None:
        text = f"{spec.dtype}[{', '.join(str(d) for d in spec.shape or ())}]"
        if spec.device not in (None, "cpu"):
            text += f" {spec.device}"
        symbols = [d for d in spec.shape or () if isinstance(d, str)]
    elif spec.arg == "constant":
        text, symbols = f"constant {spec.value!r}", []
    elif spec.arg in ("symint", "symfloat", "symbool"):
        text, symbols = f"{spec.arg} {spec.value}", [spec.value] if isinstance(spec.value, str) else []
    else:
        text, symbols = spec.arg + (f" {spec.class_fqn}" if spec.class_fqn else ""), []
    if spec.kind == "BUFFER" and spec.persistent is False:
        text += " (non-persistent)"
    if ranges is not None and other is not None:
        moved = [s for s in dict.fromkeys(symbols) if s in ranges and ranges.get(s) != other.get(s)]
        if moved:
            text += " (" + ", ".join(f"{s} in {range_text(ranges[s])}" for s in moved) + ")"
    return text
