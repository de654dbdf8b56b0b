"""What a terminal needs from the text output: whether to colour it, the styles, and
how wide text is on screen.

Colour follows the conventions other tools honour: ``NO_COLOR`` set and not empty
turns it off (no-color.org), else ``FORCE_COLOR`` set and not empty turns it on even
when the output is piped (force-color.org; CI logs render it), else colour only on a
terminal that is not ``TERM=dumb``. Widths count what a terminal draws: east-asian
wide and full-width characters take two cells, combining marks and format characters
none, so a table with ``編码器`` or ``café`` in a column stays aligned where
``len`` would not. Torch-free, standard library only.
"""

from __future__ import annotations

import os
import unicodedata
from typing import IO

TAB_WIDTH = 4  # tabs in an excerpt become spaces, so the underline lines up


def wants_colour(stream: IO[str]) -> bool:
    """Whether text written to ``stream`` should carry ANSI colour."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return _isatty(stream) and os.environ.get("TERM") != "dumb"


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # a closed or replaced stream
        return False


def char_width(char: str) -> int:
    """Terminal cells of one character: 2 for wide, 0 for combining and format marks."""
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def width(text: str) -> int:
    """Terminal cells of ``text`` (one line, tabs already expanded)."""
    if text.isascii():
        return len(text)
    return sum(char_width(c) for c in text)


def ljust(text: str, cells: int) -> str:
    """``text`` padded with spaces to ``cells`` terminal cells."""
    return text + " " * max(0, cells - width(text))


def truncate(text: str, cells: int) -> str:
    """``text`` cut to at most ``cells`` terminal cells, with an ellipsis when cut."""
    if width(text) <= cells:
        return text
    out, used = [], 0
    for c in text:
        w = char_width(c)
        if used + w > cells - 1:
            break
        out.append(c)
        used += w
    return "".join(out) + "…"


_CODES = {"bold": "1", "dim": "2", "red": "31", "yellow": "33", "blue": "34", "cyan": "36", "green": "32"}
_SEVERITY = {"error": "red", "warning": "yellow", "information": "blue", "hint": "cyan"}


class Style:
    """ANSI styles, or none: ``Style(False)`` returns every text unchanged."""

    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def __call__(self, text: str, *names: str) -> str:
        if not self.colour or not text or not names:
            return text
        return f"\x1b[{';'.join(_CODES[n] for n in names)}m{text}\x1b[0m"

    def severity(self, text: str, severity: str) -> str:
        return self(text, "bold", _SEVERITY.get(severity, "red"))
