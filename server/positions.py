"""Columns between Python's AST (UTF-8 bytes) and the LSP's negotiated encoding.

``ast`` and tracebacks give 1-based lines and UTF-8 *byte* columns; the LSP counts
UTF-16 code units unless client and server agreed on ``utf-8`` or ``utf-32``
(``general.positionEncodings``; pygls picks the client's first supported choice,
Neovim prefers utf-8). Getting this wrong puts squiggles off by one per non-ASCII
character before them, so every conversion goes through here, including cutting a
result's ranges into per-line spans (:class:`SourceSpans`) for the hover index.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from exportlens.core.model.signature import SourceLine

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"

# The LSP's line terminators (``str.splitlines`` knows more, e.g. form feeds).
_EOL = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """The document's lines without terminators; always at least one."""
    return _EOL.split(text)


def units(text: str, encoding: str) -> int:
    """How many code units of ``encoding`` ``text`` takes."""
    if encoding == UTF8:
        return len(text.encode("utf-8", errors="surrogatepass"))
    if encoding == UTF32:
        return len(text)
    return len(text.encode("utf-16-le", errors="surrogatepass")) // 2


def byte_column_to_units(line: str, byte_column: int, encoding: str) -> int:
    """A 0-based UTF-8 byte offset into ``line`` as 0-based code units of ``encoding``.

    An offset past the end clamps to the end; one inside a character rounds down.
    """
    if encoding == UTF8:
        return max(0, min(byte_column, units(line, UTF8)))
    prefix = line.encode("utf-8", errors="surrogatepass")[: max(0, byte_column)]
    return units(prefix.decode("utf-8", errors="ignore"), encoding)


def units_to_index(line: str, column: int, encoding: str) -> int:
    """0-based code units of ``encoding`` as a Python ``str`` index into ``line`` (clamped)."""
    if encoding == UTF32:
        return max(0, min(column, len(line)))
    count = 0
    for index, char in enumerate(line):
        if count >= column:
            return index
        count += units(char, encoding)
    return len(line)


def convert(line: str, column: int, source: str, target: str) -> int:
    """A 0-based column in ``source`` units as ``target`` units, on the same line."""
    if source == target:
        return column
    return units(line[: units_to_index(line, column, source)], target)


@dataclass(frozen=True)
class LineSpan:
    """``[start, end)`` on one 0-based line, in the code units of some encoding."""

    line: int
    start: int
    end: int


class SourceSpans:
    """A document's lines, and core ranges (1-based lines, UTF-8 byte columns) cut
    into per-line spans in one encoding (UTF-16 unless told otherwise).

    Converted once, when a result arrives: ASCII lines, most of a model file, take
    the short path, the rest go through :func:`byte_column_to_units`.
    """

    def __init__(self, lines: list[str], encoding: str = UTF16) -> None:
        self.lines = lines
        self.encoding = encoding

    def column(self, line0: int, byte_column: int) -> int:
        """A 0-based UTF-8 byte offset on ``line0`` in this encoding's units."""
        text = self.lines[line0]
        if text.isascii():
            return max(0, min(byte_column, len(text)))
        return byte_column_to_units(text, byte_column, self.encoding)

    def extent(self, line0: int) -> tuple[int, int] | None:
        """The line without its indentation and trailing blanks."""
        if not 0 <= line0 < len(self.lines):
            return None
        text = self.lines[line0]
        stripped = text.strip()
        if not stripped:
            return None
        start = len(text) - len(text.lstrip())
        if text.isascii():
            return start, start + len(stripped)
        lead = units(text[:start], self.encoding)
        return lead, lead + units(stripped, self.encoding)

    def spans(self, where: SourceLine | None) -> list[LineSpan]:
        """A source range as per-line spans; no end means to the end of the first line."""
        if where is None or not 0 < where.line <= len(self.lines):
            return []
        first = where.line - 1
        last = first if where.end_line is None else min(max(where.end_line - 1, first), len(self.lines) - 1)
        out: list[LineSpan] = []
        for line0 in range(first, last + 1):
            ext = self.extent(line0)
            if ext is None:
                continue
            lo, hi = ext
            if line0 == first:
                lo = self.column(line0, where.column - 1)
            if line0 == last and where.end_line is not None and where.end_column is not None and where.end_line - 1 == last:
                hi = self.column(line0, where.end_column - 1)
            if lo < hi:
                out.append(LineSpan(line0, lo, hi))
        return out

    def word(self, where: SourceLine, name: str) -> list[LineSpan]:
        """``name`` written at ``where`` (a parameter's name without its annotation)."""
        line0 = where.line - 1
        if not 0 <= line0 < len(self.lines):
            return []
        start = where.column - 1
        raw = self.lines[line0].encode("utf-8", errors="surrogatepass")
        size = len(name.encode("utf-8"))
        if raw[start : start + size] != name.encode("utf-8"):
            return self.spans(where)  # spelled differently (NFKC): the whole node
        lo, hi = self.column(line0, start), self.column(line0, start + size)
        return [LineSpan(line0, lo, hi)] if lo < hi else []

    def whole_line(self, line: int) -> list[LineSpan]:
        """The 1-based ``line`` without its indentation, when it is not blank."""
        ext = self.extent(line - 1)
        return [LineSpan(line - 1, *ext)] if ext is not None else []
