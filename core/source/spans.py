"""Ranges in a model file: 1-based lines and 1-based UTF-8 *byte* columns.

Results carry columns as ``ast`` counts them, in UTF-8 bytes, everywhere: the
language server converts them to the client's encoding once, at the edge. Every
range exportlens makes from a node or a bare line is made here, so a line with
non-ASCII text cannot end short in one place and right in another. Torch-free.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Protocol

from exportlens.core.model.results import Diagnostic
from exportlens.core.model.signature import SourceLine


class Lines(Protocol):
    """A file's lines, as ``sourcemap.SourceIndex`` holds them (which builds on this
    module, so it is named here by what is read of it)."""

    @property
    def origin(self) -> str | None: ...

    def line_text(self, line: int) -> str: ...


def span(node: ast.AST) -> SourceLine:
    """A node's range, 1-based columns (ast's are 0-based byte offsets)."""
    return SourceLine(
        line=node.lineno,  # type: ignore[attr-defined]
        column=node.col_offset + 1,  # type: ignore[attr-defined]
        end_line=getattr(node, "end_lineno", None),
        end_column=(node.end_col_offset + 1) if getattr(node, "end_col_offset", None) is not None else None,  # type: ignore[attr-defined]
    )


def head(node: ast.AST) -> SourceLine:
    """The first line of a node only (a ``class``/``def`` keyword line, a statement's start)."""
    s = span(node)
    return SourceLine(s.line, s.column, s.line, None)


def statement_at(index: Lines, line: int) -> SourceLine:
    """A whole source line as a range, without its indentation, for when no finer node is known."""
    text = index.line_text(line)
    if not text.strip():
        return SourceLine(line, path=index.origin)
    # The indentation is ASCII whitespace, so its length in characters is its length in bytes.
    start = len(text) - len(text.lstrip()) + 1
    return SourceLine(line, start, line, len(text.rstrip().encode("utf-8")) + 1, path=index.origin)


def complete_range(d: Diagnostic, index: Lines) -> Diagnostic:
    """Every diagnostic gets an end: editors underline ranges, not points."""
    if d.end_line is not None and d.end_column is not None:
        return d
    full = statement_at(index, d.line)
    if d.column > 1 and d.end_line is None:
        full = SourceLine(d.line, d.column, d.line, max(full.end_column or d.column + 1, d.column + 1))
    end_line = d.end_line if d.end_line is not None else full.end_line or d.line
    end_column = full.end_column if end_line == d.line and full.end_column else d.column + 1
    column = d.column if d.column > 1 or full.column is None else full.column
    return replace(d, column=column, end_line=end_line, end_column=end_column)
