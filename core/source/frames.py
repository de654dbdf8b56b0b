"""Where code ran: the frames of tracebacks and fx stack traces, and which are the user's.

Every line exportlens reports for a failure or a mutation comes from a frame: a
live exception's traceback, the text torch quotes in its messages and in a node's
``stack_trace``, the stack a ``draft_export`` report records. This module is the one
notion of a frame and of "in the model file" for all of them. Torch-free.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

_FRAME_RE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>\S+))?')


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str = ""


def same_file(a: str, b: str) -> bool:
    """The same file, also when one path goes through a symlink."""
    if a == b:
        return True
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def deepest_in_file(frames: Iterable[Frame], path: str) -> Frame | None:
    """The innermost frame in ``path`` (frames run outermost first)."""
    found = None
    for f in frames:
        if same_file(f.file, path):
            found = f
    return found


def frames_in_text(text: str) -> list[tuple[str, int, str]]:
    """``(file, line, function)`` of every ``File "...", line N`` in a traceback text."""
    return [(m["file"], int(m["line"]), m["func"] or "") for m in _FRAME_RE.finditer(text)]
