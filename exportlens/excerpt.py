"""The lines of source a diagnostic points at, with its span underlined, as ruff and
rustc print them::

       |
    14 |         self.steps.add_(1)
       |         ^^^^^^^^^^^^^^^^^^
       |

Results count columns in UTF-8 bytes of the line (as ``ast`` does); the underline is
placed in terminal cells, so a line with ``é`` or ``編`` before the span is
underlined under the right characters. Each file is read once per report. A file
that cannot be read any more (deleted since the export) shows no excerpt rather
than a wrong one. Torch-free.
"""

from __future__ import annotations

from exportlens.cells import Cells
from exportlens.terminal import TAB_WIDTH, Style, width

MAX_SPAN_LINES = 6  # a longer span shows its first lines and its last, like ruff


class Sources:
    """Each file's lines, read once; None for a file that cannot be read as text. A
    notebook's are its module's (``exportlens.cells``)."""

    def __init__(self, cells: Cells | None = None) -> None:
        self._files: dict[str, list[str] | None] = {}
        self.cells = cells or Cells()

    def lines(self, path: str) -> list[str] | None:
        if path not in self._files and self.cells.module(path) is not None:
            self._files[path] = self.cells.lines(path)
        if path not in self._files:
            try:
                with open(path, "rb") as f:
                    data = f.read()
                self._files[path] = data.decode("utf-8", errors="replace").splitlines()
            except OSError:
                self._files[path] = None
        return self._files[path]


def _char_index(text: str, byte_column: int) -> int:
    """The 0-based character index of a 1-based UTF-8 byte column of ``text``."""
    head = text.encode("utf-8")[: max(0, byte_column - 1)]
    return len(head.decode("utf-8", errors="ignore"))


def _shown(text: str) -> str:
    return text.replace("\t", " " * TAB_WIDTH).rstrip()


def excerpt(
    sources: Sources,
    path: str,
    line: int,
    column: int,
    end_line: int | None,
    end_column: int | None,
    style: Style,
    *,
    severity: str = "error",
    offset: int = 0,
) -> list[str]:
    """The framed source lines ``line``..``end_line`` of ``path`` with the span from
    ``column`` to ``end_column`` (exclusive, byte columns) underlined; [] when the file
    or the line is not there. Without an end, the rest of the line is underlined.
    ``offset``: subtracted from the line numbers shown (a notebook's lines are
    numbered in their cell)."""
    lines = sources.lines(path)
    if lines is None or not 1 <= line <= len(lines):
        return []
    last = min(end_line if end_line is not None and end_line >= line else line, len(lines))
    numbers = list(range(line, last + 1))
    if len(numbers) > MAX_SPAN_LINES:
        numbers = numbers[: MAX_SPAN_LINES - 2] + [0] + numbers[-1:]  # 0: the "..." row
    gutter = len(str(last - offset))
    bar = style(" " * gutter + " |", "blue", "bold")
    out = [bar]
    for n in numbers:
        if n == 0:
            out.append(style("...", "blue", "bold"))
            continue
        text = lines[n - 1]
        indent = len(text) - len(text.lstrip())
        # Column 1 of an indented line means "the line" (a note without a column): its code, not its indentation.
        start = _char_index(text, column) if n == line and column > 1 else indent
        stop = _char_index(text, end_column) if n == last and end_line is not None and end_column is not None else len(text.rstrip())
        out.append(style(f"{n - offset:>{gutter}} |", "blue", "bold") + (" " + _shown(text) if text.strip() else ""))
        lead = width(text[:start].replace("\t", " " * TAB_WIDTH))
        cells = max(1, width(_shown(text[start:stop])))
        out.append(bar + " " + " " * lead + style("^" * cells, "bold", {"warning": "yellow", "information": "blue"}.get(severity, "red")))
    out.append(bar)
    return out
