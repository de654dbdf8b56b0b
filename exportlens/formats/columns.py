"""Byte columns to character columns.

Results count columns in UTF-8 bytes of the line, as Python's ``ast`` does; SARIF
(``columnKind: unicodeCodePoints``) and GitHub annotations count characters. On an
ASCII line the two agree; elsewhere the file's line tells how many characters the
bytes before the column hold. A file that cannot be read (deleted since) keeps the
byte column. A notebook's lines are its module's (``exportlens.cells``).
"""

from __future__ import annotations

from exportlens.cells import Cells


class Columns:
    """Reads each file once and converts its columns."""

    def __init__(self, cells: Cells | None = None) -> None:
        self._lines: dict[str, list[bytes] | None] = {}
        self.cells = cells or Cells()

    def _file(self, path: str) -> list[bytes] | None:
        if path not in self._lines and self.cells.module(path) is not None:
            self._lines[path] = [line.encode("utf-8") for line in self.cells.lines(path) or []]
        if path not in self._lines:
            try:
                with open(path, "rb") as f:
                    self._lines[path] = f.read().split(b"\n")
            except OSError:
                self._lines[path] = None
        return self._lines[path]

    def char_column(self, path: str, line: int, byte_column: int) -> int:
        """The 1-based character column of the 1-based ``byte_column`` of ``line``."""
        lines = self._file(path)
        if lines is None or not 1 <= line <= len(lines) or byte_column <= 1:
            return max(1, byte_column)
        head = lines[line - 1][: byte_column - 1]
        # Past the end of the line (an exclusive end at the line's end): count the rest as is.
        extra = byte_column - 1 - len(head)
        return len(head.decode("utf-8", errors="replace")) + extra + 1
