"""``dynamic_shapes`` that leaves inputs out (``export-error``): each missing input
added as static (``None``); the exact edit, and where none is offered. The messages
are torch 2.13's, the ranges the ones a real export reports (the first line of the
``dynamic_shapes = ...`` statement); tests/e2e/test_fix_families_export.py exports
each edit again."""

from __future__ import annotations

import textwrap

from exportlens.core.fixes import shape_keys
from exportlens.core.fixes.model import apply
from exportlens.core.model.results import Diagnostic

PARTIAL = textwrap.dedent(
    """\
    import torch
    from torch import nn
    from torch.export import Dim

    class Net(nn.Module):
        def forward(self, x, y):
            return x + y.sum()

    batch = Dim("batch", min=2, max=64)
    model = Net()
    example_args = (torch.randn(4, 3), torch.randn(2, 2))
    dynamic_shapes = {"x": {0: batch}}
    """
)
TAIL = (
    "Alternatively, you could also ignore arg names entirely and specify `dynamic_shapes` as a list/tuple matching `inputs`. "
    "For more information about this error, see: https://pytorch.org/docs/main/generated/exportdb/index.html#dynamic-shapes-validation"
)


def _keys_message(expected: list[str], got: list[str]) -> str:
    return f"When `dynamic_shapes` is specified as a dict, its top-level keys must be the arg names {expected} of `inputs`, but here they are {got}. {TAIL}"


def _length_message(expected: int, got: int, path: str = "") -> str:
    return (
        f"Detected mismatch between the structure of `inputs` and `dynamic_shapes`: `inputs{path}` has {expected} elements, "
        f"but `dynamic_shapes{path}` has {got} elements\n"
        "For more information about this error, see: https://pytorch.org/docs/main/generated/exportdb/index.html#dynamic-shapes-validation"
    )


def _at(source: str, message: str) -> Diagnostic:
    """At the statement's first line, as export reports it."""
    lines = source.split("\n")
    at = next(i for i, t in enumerate(lines) if t.startswith("dynamic_shapes = "))
    return Diagnostic("export-error", message, at + 1, 1, at + 1, len(lines[at].encode()) + 1, "Net")


def _fixed(source: str, message: str) -> list[tuple[str, bool, str]]:
    return [(f.title, f.preferred, apply(source, f.edits)) for f in shape_keys.fixes(source, _at(source, message))]


def test_a_missing_key_is_added_as_static() -> None:
    d = _at(PARTIAL, _keys_message(["x", "y"], ["x"]))
    assert (d.line, d.column, d.end_line, d.end_column) == (12, 1, 12, 35)  # as the real export reports it
    [(title, preferred, text)] = _fixed(PARTIAL, d.message)
    assert text == PARTIAL.replace('{"x": {0: batch}}', '{"x": {0: batch}, "y": None}')
    assert preferred and title == 'add `y` to `dynamic_shapes` as static (`"y": None`)'
    # The user's quotes; a trailing comma on one line.
    quoted = PARTIAL.replace('{"x": {0: batch}}', "{'x': {0: batch},}")
    [(_, _, text)] = _fixed(quoted, d.message)
    assert "dynamic_shapes = {'x': {0: batch}, 'y': None}\n" in text


def test_missing_keys_go_in_the_order_of_the_arg_names() -> None:
    three = PARTIAL.replace("def forward(self, x, y):", "def forward(self, w, x, y):")
    [(title, _, text)] = _fixed(three, _keys_message(["w", "x", "y"], ["x"]))
    assert 'dynamic_shapes = {"w": None, "x": {0: batch}, "y": None}\n' in text
    assert title.startswith("add `w`, `y` to `dynamic_shapes`")
    # One key a line: each new one on its own line.
    tall = three.replace('dynamic_shapes = {"x": {0: batch}}', 'dynamic_shapes = {\n    "x": {0: batch},\n}')
    [(_, _, text)] = _fixed(tall, _keys_message(["w", "x", "y"], ["x"]))
    assert text.endswith('dynamic_shapes = {\n    "w": None,\n    "x": {0: batch},\n    "y": None,\n}\n')
    no_comma = tall.replace("{0: batch},\n}", "{0: batch}\n}")
    [(_, _, text)] = _fixed(no_comma, _keys_message(["w", "x", "y"], ["x"]))
    assert text.endswith('dynamic_shapes = {\n    "w": None,\n    "x": {0: batch},\n    "y": None\n}\n')
    # Keys out of the arg names' order: the missing ones at the end.
    shuffled = three.replace('{"x": {0: batch}}', '{"y": None, "w": None}')
    [(_, _, text)] = _fixed(shuffled, _keys_message(["w", "x", "y"], ["y", "w"]))
    assert 'dynamic_shapes = {"y": None, "w": None, "x": None}\n' in text


def test_a_tuple_or_list_one_short_is_padded_with_none() -> None:
    for literal, padded in (("({0: batch},)", "({0: batch}, None)"), ("[{0: batch}]", "[{0: batch}, None]"), ("({0: batch})", None)):
        source = PARTIAL.replace('{"x": {0: batch}}', literal)
        found = _fixed(source, _length_message(2, 1))
        if padded is None:
            assert found == []  # not a tuple: a dict in parentheses
            continue
        [(title, preferred, text)] = found
        assert text == source.replace(literal, padded) and preferred
        assert "with `None` for the 1 last input it leaves out" in title
    tall = PARTIAL.replace('{"x": {0: batch}}', "[\n    {0: batch},\n]")
    [(_, _, text)] = _fixed(tall, _length_message(3, 1))
    assert text.endswith("dynamic_shapes = [\n    {0: batch},\n    None,\n    None,\n]\n")


def test_no_shape_keys_fix_unless_keys_are_only_missing_from_a_literal() -> None:
    cases = {
        "a misspelt key": (PARTIAL.replace('{"x"', '{"X"'), _keys_message(["x", "y"], ["X"])),
        "an extra key": (PARTIAL.replace('{"x": {0: batch}}', '{"x": {0: batch}, "z": None}'), _keys_message(["x", "y"], ["x", "z"])),
        "keys that are not the literal's": (PARTIAL, _keys_message(["x", "y", "w"], ["x", "w"])),
        "a spread": (PARTIAL.replace('{"x": {0: batch}}', '{"x": {0: batch}, **more}'), _keys_message(["x", "y"], ["x"])),
        "a computed key": (PARTIAL.replace('{"x": {0: batch}}', "{name: {0: batch}}"), _keys_message(["x", "y"], ["x"])),
        "not a literal": (PARTIAL.replace('{"x": {0: batch}}', 'dict(x={0: batch})'), _keys_message(["x", "y"], ["x"])),
        "a nested tuple one short": (PARTIAL.replace('{"x": {0: batch}}', "({0: batch}, [None])"), _length_message(2, 1, "[1]")),
        "a tuple too long": (PARTIAL.replace('{"x": {0: batch}}', "({0: batch}, None, None)"), _length_message(2, 3)),
        "a starred element": (PARTIAL.replace('{"x": {0: batch}}', "(*shapes,)"), _length_message(2, 1)),
        "another error": (PARTIAL, "Dynamic shape spec mismatch"),
    }
    for why, (source, message) in cases.items():
        assert _fixed(source, message) == [], why
