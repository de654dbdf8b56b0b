"""Ranges in UTF-8 byte columns, the unit of every column in a result."""

from __future__ import annotations

from exportlens.core.model.results import Diagnostic
from exportlens.core.model.signature import SourceLine
from exportlens.core.source.sourcemap import SourceIndex
from exportlens.core.source.spans import complete_range, statement_at

SOURCE = 'def f(x):\n    y = "€é"  # ünïcode\n\n    return y\n'


def test_a_line_without_indentation_ends_in_utf8_bytes() -> None:
    index = SourceIndex.build(SOURCE)
    text = index.line_text(2)
    where = statement_at(index, 2)
    assert (where.line, where.column, where.end_line) == (2, 5, 2)
    assert where.end_column == len(text.encode("utf-8")) + 1 and where.end_column > len(text) + 1
    assert statement_at(index, 3) == SourceLine(3)  # a blank line has no range
    assert statement_at(index, 99) == SourceLine(99)


def test_complete_range_gives_every_diagnostic_an_end() -> None:
    index = SourceIndex.build(SOURCE)
    full = statement_at(index, 2)
    whole = complete_range(Diagnostic("export-error", "m", 2), index)
    assert (whole.column, whole.end_line, whole.end_column) == (full.column, 2, full.end_column)
    from_column = complete_range(Diagnostic("export-error", "m", 2, 9), index)
    assert (from_column.column, from_column.end_column) == (9, full.end_column)
    ended = Diagnostic("export-error", "m", 2, 5, 2, 6)
    assert complete_range(ended, index) is ended
    blank = complete_range(Diagnostic("export-error", "m", 3), index)
    assert (blank.column, blank.end_line, blank.end_column) == (1, 3, 2)
