"""What a quick fix is, as plain data: a titled set of text edits that removes one
diagnostic.

Positions are the core's everywhere (``Diagnostic``, ``SourceLine``, ``ast``):
1-based lines and 1-based UTF-8 *byte* columns, end exclusive. The language server
converts them to the client's encoding at the edge, with the exact text the result
was made from; nothing here knows about the LSP. Torch-free.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from exportlens.core.model.results import Diagnostic


@dataclass(frozen=True)
class TextEdit:
    """Replace ``[line:column, end_line:end_column)`` with ``new_text`` (an insertion
    when start and end are equal)."""

    line: int
    column: int
    end_line: int
    end_column: int
    new_text: str
    # The file the edit is in, when it is not the diagnostic's own (a class defined in
    # a local module); a real path.
    path: str | None = None


@dataclass(frozen=True)
class Fix:
    title: str
    diagnostic: Diagnostic  # the diagnostic this fix removes
    edits: tuple[TextEdit, ...]
    # The one obvious fix: editors apply it from "fix all" / a single keystroke. Never
    # for a fix that changes what the program accepts (a dynamic dim made static).
    preferred: bool = False


def replace_node(node: ast.AST, new_text: str) -> TextEdit:
    """An edit replacing exactly ``node``'s source text."""
    return TextEdit(
        node.lineno,  # type: ignore[attr-defined]
        node.col_offset + 1,  # type: ignore[attr-defined]
        node.end_lineno,  # type: ignore[attr-defined]
        node.end_col_offset + 1,  # type: ignore[attr-defined]
        new_text,
    )


def insert_at(line: int, byte_column: int, text: str) -> TextEdit:
    """An insertion before the 1-based byte ``byte_column`` of ``line``."""
    return TextEdit(line, byte_column, line, byte_column, text)


def apply(source: str, edits: tuple[TextEdit, ...] | list[TextEdit]) -> str:
    """``source`` with ``edits`` applied (non-overlapping; any order): what an editor
    does with the fix, for tests and for checking a fix parses before offering it."""
    lines = source.split("\n")
    starts = [0]
    for text in lines:
        starts.append(starts[-1] + len(text.encode("utf-8")) + 1)
    raw = source.encode("utf-8")

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column - 1

    # Last first, so earlier offsets hold; at one point a replacement goes before an
    # insertion there, which then lands in front of the replacement's text.
    for e in sorted(edits, key=lambda e: (e.line, e.column, (e.line, e.column) != (e.end_line, e.end_column)), reverse=True):
        raw = raw[: offset(e.line, e.column)] + e.new_text.encode("utf-8") + raw[offset(e.end_line, e.end_column) :]
    return raw.decode("utf-8")


def parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


def segment(source_lines: list[str], node: ast.AST) -> str:
    """``node``'s source text (``ast.get_source_segment`` on pre-split lines)."""
    first, last = node.lineno - 1, node.end_lineno - 1  # type: ignore[attr-defined]
    start, end = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
    if first == last:
        return source_lines[first].encode("utf-8")[start:end].decode("utf-8")
    parts = [source_lines[first].encode("utf-8")[start:].decode("utf-8")]
    parts += source_lines[first + 1 : last]
    parts.append(source_lines[last].encode("utf-8")[:end].decode("utf-8"))
    return "\n".join(parts)


def diff_edits(old: str, new: str, path: str | None = None) -> tuple[TextEdit, ...]:
    """Edits that turn ``old`` into ``new``, whole lines at a time (what a chain of
    fixes, each made against the text the one before left, does to the user's text)."""
    import difflib
    import re

    def lines(text: str) -> list[str]:
        return re.findall(r"[^\n]*\n|[^\n]+$", text)

    before, after = lines(old), lines(new)
    if old.endswith("\n") or not before:
        end = (len(before) + 1, 1)
    else:
        end = (len(before), len(before[-1].encode("utf-8")) + 1)
    edits = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        if tag != "equal":
            stop = (i2 + 1, 1) if i2 < len(before) else end
            start = (i1 + 1, 1) if i1 < len(before) else end
            edits.append(TextEdit(start[0], start[1], stop[0], stop[1], "".join(after[j1:j2]), path))
    return tuple(edits)
