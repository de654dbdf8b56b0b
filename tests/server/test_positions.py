"""UTF-8 byte columns (ast) <-> LSP columns in each negotiated encoding."""

from __future__ import annotations

import pytest

from exportlens.core.model.signature import SourceLine
from exportlens.server.positions import (
    UTF8,
    UTF16,
    UTF32,
    LineSpan,
    SourceSpans,
    byte_column_to_units,
    convert,
    split_lines,
    units,
    units_to_index,
)

LINE = 'x = "ü€😀" + self.steps'  # 2-, 3- and 4-byte UTF-8; the emoji is 2 UTF-16 units


def byte_col(line: str, text: str) -> int:
    return len(line[: line.index(text)].encode())


@pytest.mark.parametrize(
    ("encoding", "expected"),
    [(UTF8, len('x = "ü€😀" + '.encode())), (UTF16, len('x = "ü€😀" + '.encode("utf-16-le")) // 2), (UTF32, len('x = "ü€😀" + '))],
)
def test_byte_column_to_each_encoding(encoding: str, expected: int) -> None:
    assert byte_column_to_units(LINE, byte_col(LINE, "self"), encoding) == expected


def test_the_three_encodings_differ_on_this_line() -> None:
    b = byte_col(LINE, "self")
    assert len({byte_column_to_units(LINE, b, e) for e in (UTF8, UTF16, UTF32)}) == 3


def test_offsets_past_the_end_clamp_and_inside_a_character_round_down() -> None:
    assert byte_column_to_units(LINE, 10_000, UTF16) == units(LINE, UTF16)
    inside_euro = len('x = "ü'.encode()) + 1  # the middle byte of '€'
    assert byte_column_to_units(LINE, inside_euro, UTF16) == len('x = "ü')


def test_round_trip_between_encodings() -> None:
    for index in range(len(LINE) + 1):
        u16 = units(LINE[:index], UTF16)
        u8 = convert(LINE, u16, UTF16, UTF8)
        assert u8 == len(LINE[:index].encode())
        assert convert(LINE, u8, UTF8, UTF16) == u16
        assert units_to_index(LINE, u16, UTF16) == index


def test_split_lines_uses_the_lsp_terminators_only() -> None:
    assert split_lines("a\r\nb\rc\nd\x0ce") == ["a", "b", "c", "d\x0ce"]
    assert split_lines("") == [""]
    assert split_lines("a\n") == ["a", ""]


def test_source_ranges_become_per_line_spans_in_utf16() -> None:
    lines = ["def f(x):", "    " + LINE, "", "    return x"]
    text = SourceSpans(lines)
    start, end = byte_col(lines[1], "self") + 1, len(lines[1].encode()) + 1  # 1-based UTF-8 bytes
    u16 = len(lines[1][: lines[1].index("self")].encode("utf-16-le")) // 2
    assert text.spans(SourceLine(2, start, 2, end)) == [LineSpan(1, u16, units(lines[1], UTF16))]
    assert text.spans(SourceLine(2, 5)) == [LineSpan(1, 4, units(lines[1], UTF16))]  # no end: to the end of the line
    assert text.spans(SourceLine(1, 1, 4, 9)) == [LineSpan(0, 0, 9), LineSpan(1, 4, units(lines[1], UTF16)), LineSpan(3, 4, 8)]  # the end column cuts the last line
    assert text.spans(None) == [] and text.spans(SourceLine(9)) == []
    assert text.whole_line(2) == [LineSpan(1, 4, units(lines[1], UTF16))] and text.whole_line(3) == []
    assert text.word(SourceLine(1, 7), "x") == [LineSpan(0, 6, 7)]
    assert text.word(SourceLine(1, 7), "y") == [LineSpan(0, 6, 9)]  # not written there: the whole node
    assert SourceSpans(lines, UTF8).spans(SourceLine(2, start, 2, end)) == [LineSpan(1, start - 1, end - 1)]
