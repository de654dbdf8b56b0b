"""``export-error`` where ``dynamic_shapes`` leaves inputs out: each one missing is
added, static (``None``).

torch 2.13 checks the structure of ``dynamic_shapes`` before it traces. Two of its
messages name what is missing:

* a dict: "When `dynamic_shapes` is specified as a dict, its top-level keys must be
  the arg names ['x', 'y'] of `inputs`, but here they are ['x']." The fix adds each
  missing name with the value ``None``, in the order of the arg names
  (``{"x": {0: batch}, "y": None}``);
* a tuple or list: "Detected mismatch between the structure of `inputs` and
  `dynamic_shapes`: `inputs` has 2 elements, but `dynamic_shapes` has 1 elements"
  (at the top level, no path after the names). The fix pads it with ``None`` at the
  end (``({0: batch}, None)``): positions follow the inputs, so the missing ones are
  the last.

``None`` is what export assumes of an input that ``dynamic_shapes`` does not make
dynamic (its sizes are the example's), so nothing the model computes changes:
preferred. Offered only when the diagnostic's range starts at an assignment
``dynamic_shapes = <literal>`` (the range is its first line), the literal is a dict
whose keys are all string constants, exactly the names torch says it has, all among
the arg names (a misspelt or extra key is not a missing one), or a tuple/list without
``*`` of exactly the length torch says. Checked with torch 2.13 by exporting the
edited models (a dict missing one and two keys, one-line and one key a line, a tuple
and a list one short): each exports cleanly.
"""

from __future__ import annotations

import ast
import re

from exportlens.core.fixes import nodes
from exportlens.core.fixes.model import Fix, TextEdit, insert_at
from exportlens.core.model.results import Diagnostic

_KEYS = re.compile(r"its top-level keys must be the arg names (\[[^\]]*\]) of `inputs`, but here they are (\[[^\]]*\])")
_LENGTH = re.compile(r"`inputs` has (\d+) elements, but `dynamic_shapes` has (\d+) elements")
_STRUCTURE = "Detected mismatch between the structure of `inputs` and `dynamic_shapes`: "


def _names(text: str) -> list[str] | None:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return value


def _literal(tree: ast.Module, d: Diagnostic) -> ast.expr | None:
    """The value of the assignment the diagnostic's range starts at."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and nodes.starts_at(node, d):
            return node.value
        if isinstance(node, ast.AnnAssign) and node.value is not None and nodes.starts_at(node, d):
            return node.value
    return None


def _text_between(lines: list[str], line: int, column: int, end_line: int, end_column: int) -> str:
    """The source from ``line:column`` to ``end_line:end_column`` (0-based byte columns)."""
    if line == end_line:
        return lines[line - 1].encode("utf-8")[column:end_column].decode("utf-8")
    parts = [lines[line - 1].encode("utf-8")[column:].decode("utf-8"), *lines[line : end_line - 1]]
    return "\n".join([*parts, lines[end_line - 1].encode("utf-8")[:end_column].decode("utf-8")])


def _indent(lines: list[str], node: ast.AST) -> str:
    text = lines[node.lineno - 1]  # type: ignore[attr-defined]
    return text[: len(text) - len(text.lstrip())]


def _append(lines: list[str], literal: ast.expr, last: ast.expr, entries: list[str]) -> TextEdit | None:
    """``entries`` after ``last``, the literal's last element, before its closing bracket."""
    end_line, end_col = literal.end_lineno, literal.end_col_offset
    if end_line is None or end_col is None or last.end_lineno is None or last.end_col_offset is None:
        return None
    closer = end_col - 1  # the bracket itself
    if lines[end_line - 1].encode("utf-8")[closer : closer + 1] not in (b")", b"]", b"}"):
        return None
    gap = _text_between(lines, last.end_lineno, last.end_col_offset, end_line, closer)
    if "#" in gap or gap.strip() not in ("", ","):
        return None  # a comment, or not the brackets this assumes
    if last.end_lineno == end_line:
        # One line: the gap (a trailing comma) becomes the new entries.
        return TextEdit(last.end_lineno, last.end_col_offset + 1, end_line, closer + 1, "".join(f", {e}" for e in entries))
    # One element a line: each new one on its own line, with the trailing comma kept.
    indent = _indent(lines, last)
    if gap.strip() == ",":
        at = gap.index(",") + 1
        return insert_at(last.end_lineno, last.end_col_offset + at + 1, "".join(f"\n{indent}{e}," for e in entries))
    return insert_at(last.end_lineno, last.end_col_offset + 1, "," + ",".join(f"\n{indent}{e}" for e in entries))


def _dict_fix(lines: list[str], literal: ast.Dict, expected: list[str], got: list[str], diagnostic: Diagnostic) -> Fix | None:
    keys: list[str] = []
    for key in literal.keys:
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None  # ``**spread`` or a computed key
        keys.append(key.value)
    if sorted(keys) != sorted(got) or len(set(keys)) != len(keys) or not set(keys) < set(expected):
        return None
    if not keys:
        return None
    missing = [n for n in expected if n not in keys]
    first = literal.keys[0]
    assert first is not None
    quote = lines[first.lineno - 1].encode("utf-8")[first.col_offset : first.col_offset + 1].decode("utf-8")
    quote = quote if quote in ("'", '"') else '"'  # the user's quotes

    def entry(name: str) -> str:
        return f"{quote}{name}{quote}: None"

    in_order = [n for n in expected if n in keys] == keys
    edits: list[TextEdit] = []
    if in_order:
        # Each missing name goes before the next present one; the rest after the last.
        pending: list[str] = []
        for name in expected:
            if name not in keys:
                pending.append(name)
                continue
            if pending:
                key = literal.keys[keys.index(name)]
                assert key is not None
                index = keys.index(name)
                before = literal.values[index - 1] if index else None
                starts_line = (before.end_lineno if before is not None else literal.lineno) != key.lineno
                text = "".join(f"{entry(p)},\n{_indent(lines, key)}" if starts_line else f"{entry(p)}, " for p in pending)
                edits.append(insert_at(key.lineno, key.col_offset + 1, text))
                pending = []
        tail = pending
    else:
        tail = missing
    if tail:
        appended = _append(lines, literal, literal.values[-1], [entry(n) for n in tail])
        if appended is None:
            return None
        edits.append(appended)
    said = ", ".join(f"`{n}`" for n in missing)
    title = f"add {said} to `dynamic_shapes` as static (`{entry(missing[0])}`{', ...' if len(missing) > 1 else ''})"
    return Fix(title, diagnostic, tuple(edits), preferred=True)


def fixes(source: str, diagnostic: Diagnostic) -> list[Fix]:
    tree = nodes.parse(source)
    if tree is None:
        return []
    literal = _literal(tree, diagnostic)
    if literal is None:
        return []
    lines = source.split("\n")
    keys = _KEYS.search(diagnostic.message)
    if keys is not None and isinstance(literal, ast.Dict):
        expected, got = _names(keys.group(1)), _names(keys.group(2))
        if expected is None or got is None:
            return []
        fix = _dict_fix(lines, literal, expected, got, diagnostic)
        return [fix] if fix is not None else []
    length = _LENGTH.search(diagnostic.message)
    if length is None or _STRUCTURE + length.group(0) not in diagnostic.message or not isinstance(literal, (ast.Tuple, ast.List)):
        return []
    expected_n, got_n = int(length.group(1)), int(length.group(2))
    if got_n >= expected_n or len(literal.elts) != got_n or not literal.elts or any(isinstance(e, ast.Starred) for e in literal.elts):
        return []
    opener = lines[literal.lineno - 1].encode("utf-8")[literal.col_offset : literal.col_offset + 1]
    if opener not in (b"(", b"["):
        return []  # a tuple without brackets: nothing to put the new ones inside
    missing = expected_n - got_n
    appended = _append(lines, literal, literal.elts[-1], ["None"] * missing)
    if appended is None:
        return []
    kind = "tuple" if isinstance(literal, ast.Tuple) else "list"
    title = f"pad the `dynamic_shapes` {kind} with `None` for the {missing} last input{'s' if missing > 1 else ''} it leaves out (static)"
    return [Fix(title, diagnostic, (appended,), preferred=True)]
