"""Columns between Python's AST (UTF-8 bytes) and the LSP's negotiated encoding.

``ast`` and tracebacks give 1-based lines and UTF-8 *byte* columns; the LSP counts
UTF-16 code units unless client and server agreed on ``utf-8`` or ``utf-32``
(``general.positionEncodings``; pygls picks the client's first supported choice,
Neovim prefers utf-8). Getting this wrong puts squiggles off by one per non-ASCII
character before them, so every conversion goes through here.
"""

from __future__ import annotations

import re

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
