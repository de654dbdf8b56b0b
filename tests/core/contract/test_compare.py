"""The breaking/compatible rules, as a table: each row an edit of a recorded signature
and what ``compare`` must say about it (breaking or not, and the first line)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from exportlens.core.contract.compare import Change, compare
from exportlens.core.contract.snapshot import Range, SpecEntry, TargetEntry


def x(*shape: int | str, dtype: str = "float32", name: str = "x", device: str = "cpu") -> SpecEntry:
    return SpecEntry("USER_INPUT", "tensor", name=name, dtype=dtype, shape=shape, device=device)


def out(*shape: int | str, dtype: str = "float32", kind: str = "USER_OUTPUT") -> SpecEntry:
    return SpecEntry(kind, "tensor", dtype=dtype, shape=shape, device="cpu")


def param(target: str, *shape: int) -> SpecEntry:
    return SpecEntry("PARAMETER", "tensor", target=target, name="p_" + target.replace(".", "_"), dtype="float32", shape=shape, device="cpu")


def buffer(target: str, persistent: bool = True) -> SpecEntry:
    return SpecEntry("BUFFER", "tensor", target=target, name="b_" + target, persistent=persistent, dtype="float32", shape=(1,), device="cpu")


def entry(inputs: list[SpecEntry], outputs: list[SpecEntry], ranges: dict[str, Range] | None = None) -> TargetEntry:
    return TargetEntry(tuple(inputs), tuple(outputs), ranges or {})


BASE = entry([param("fc.weight", 4, 8), x("batch", 8)], [out("batch", 4)], {"batch": (1, 32)})

# (what, new entry, [(breaking, first line of the message)])
CASES: list[tuple[str, TargetEntry, list[tuple[bool, str]]]] = [
    ("nothing changed", BASE, []),
    ("output width 4 -> 6", replace(BASE, outputs=(out("batch", 6),)), [(True, "output 0: float32[batch, 4] -> float32[batch, 6]")]),
    ("output dtype", replace(BASE, outputs=(out("batch", 4, dtype="float16"),)), [(True, "output 0: float32[batch, 4] -> float16[batch, 4]")]),
    ("output rank", replace(BASE, outputs=(out("batch"),)), [(True, "output 0: float32[batch, 4] -> float32[batch]")]),
    ("output added", replace(BASE, outputs=(out("batch", 4), out(1))), [(True, "output 1 added: float32[1]")]),
    ("output removed", replace(BASE, outputs=()), [(True, "output 0 removed (was float32[batch, 4])")]),
    ("loss output instead", replace(BASE, outputs=(out("batch", 4, kind="LOSS_OUTPUT"),)), [(True, "output 0: float32[batch, 4] -> float32[batch, 4]")]),
    ("input added", replace(BASE, inputs=(*BASE.inputs, x(3, name="mask"))), [(True, "input `mask` added: float32[3]")]),
    ("input removed", replace(BASE, inputs=BASE.inputs[:1]), [(True, "input `x` removed (was float32[batch, 8])")]),
    ("input device", replace(BASE, inputs=(BASE.inputs[0], x("batch", 8, device="cuda:0"))), [(True, "input `x`: float32[batch, 8] -> float32[batch, 8] cuda:0")]),
    ("parameter reshaped", replace(BASE, inputs=(param("fc.weight", 6, 8), BASE.inputs[1])), [(True, "parameter `fc.weight`: float32[4, 8] -> float32[6, 8]")]),
    ("range widened", replace(BASE, ranges={"batch": (1, 64)}), [(False, "input `x`: float32[batch, 8] (batch in [1, 32]) -> float32[batch, 8] (batch in [1, 64])")]),
    ("range unbounded", replace(BASE, ranges={"batch": (1, None)}), [(False, "input `x`: float32[batch, 8] (batch in [1, 32]) -> float32[batch, 8] (batch in [1, inf])")]),
    ("range narrowed", replace(BASE, ranges={"batch": (1, 16)}), [(True, "input `x`: float32[batch, 8] (batch in [1, 32]) -> float32[batch, 8] (batch in [1, 16])")]),
    ("range shifted", replace(BASE, ranges={"batch": (2, 64)}), [(True, "input `x`: float32[batch, 8] (batch in [1, 32]) -> float32[batch, 8] (batch in [2, 64])")]),
    ("dim renamed, same range", entry([param("fc.weight", 4, 8), x("n", 8)], [out("n", 4)], {"n": (1, 32)}),
     [(False, "input `x`: float32[batch, 8] (batch in [1, 32]) -> float32[n, 8] (n in [1, 32])"),
      (False, "output 0: float32[batch, 4] (batch in [1, 32]) -> float32[n, 4] (n in [1, 32])")]),
    ("dynamic made static", entry([param("fc.weight", 4, 8), x(2, 8)], [out(2, 4)]),
     [(True, "input `x`: float32[batch, 8] (batch in [1, 32]) -> float32[2, 8]"), (True, "output 0: float32[batch, 4] (batch in [1, 32]) -> float32[2, 4]")]),
    ("static made dynamic, range holds it", entry([param("fc.weight", 4, 8), x("batch", "seq")], [out("batch", 4)], {"batch": (1, 32), "seq": (2, 512)}),
     [(False, "input `x`: float32[batch, 8] -> float32[batch, seq] (seq in [2, 512])")]),
    ("static made dynamic, range misses it", entry([param("fc.weight", 4, 8), x("batch", "seq")], [out("batch", 4)], {"batch": (1, 32), "seq": (16, 512)}),
     [(True, "input `x`: float32[batch, 8] -> float32[batch, seq] (seq in [16, 512])")]),
]


@pytest.mark.parametrize(("what", "new", "expected"), CASES, ids=[c[0] for c in CASES])
def test_rules(what: str, new: TargetEntry, expected: list[tuple[bool, str]]) -> None:
    assert [(c.breaking, c.message.split("\n")[0]) for c in compare(BASE, new)] == expected


def test_reordered_inputs_are_breaking_and_point_at_the_first_moved_one() -> None:
    old = entry([x(2, name="a"), x(3, name="b")], [])
    new = entry([x(3, name="b"), x(2, name="a")], [])
    assert compare(old, new) == [Change("input", 0, True, "inputs reordered: (input `a`, input `b`) -> (input `b`, input `a`)")]


def test_state_is_matched_by_target_not_position() -> None:
    """A parameter added before another is one addition, not a change of every later one."""
    old = entry([param("b.weight", 2), x(2)], [out(2)])
    new = entry([param("a.weight", 3), param("b.weight", 2), x(2)], [out(2)])
    [change] = compare(old, new)
    assert (change.side, change.index, change.breaking) == ("input", 0, True)
    assert change.message == "parameter `a.weight` added: float32[3]"


def test_buffer_made_non_persistent_is_breaking() -> None:
    old = entry([buffer("steps")], [])
    new = entry([buffer("steps", persistent=False)], [])
    [change] = compare(old, new)
    assert change.breaking and "persistent True -> False" in change.message


def test_a_range_change_is_said_once_on_the_input_not_on_every_output() -> None:
    new = replace(BASE, outputs=(out("batch", 4), out("batch", 4)), ranges={"batch": (1, 64)})
    assert [(c.side, c.index) for c in compare(BASE, new) if not c.breaking] == [("input", 1)]


def test_the_reason_follows_the_first_line() -> None:
    [change] = compare(BASE, replace(BASE, outputs=(out("batch", 6),)))
    assert change.message.split("\n")[1] == "breaking: dim 1 static 4 -> 6"
    [widened] = compare(BASE, replace(BASE, ranges={"batch": (1, 64)}))
    assert widened.message.split("\n")[1] == "compatible: dim 0 range widened [1, 32] -> [1, 64]"


def test_constants_and_symbolic_scalars() -> None:
    const = SpecEntry("USER_INPUT", "constant", name="k", value=3)
    sym = SpecEntry("USER_INPUT", "symint", name="n", value="n")
    old = entry([const, sym], [], {"n": (1, 8)})
    assert [(c.breaking, c.message.split("\n")[0]) for c in compare(old, entry([replace(const, value=4), sym], [], {"n": (1, 8)}))] == [(True, "input `k`: constant 3 -> constant 4")]
    assert [c.breaking for c in compare(old, entry([const, sym], [], {"n": (1, 16)}))] == [False]
    assert [c.breaking for c in compare(old, entry([const, sym], [], {"n": (2, 8)}))] == [True]
    # 1 and True are different constants, even though they compare equal in Python.
    assert [c.breaking for c in compare(old, entry([replace(const, value=True), sym], [], {"n": (1, 8)}))] == [True]
