"""Which text declares a target: the declaration forms of the contract, found in a
file's or a notebook cell's text without running it. Torch-free, and cheap: the
server asks on every open and change."""

from __future__ import annotations

import re
from collections.abc import Iterable

# A declaration form in a file's text; bytes for files on disk, str for editor buffers.
DECLARES_TEXT = re.compile(r"\bexample_args\b|exportlens\.target|@target\b|from exportlens import")
DECLARES = re.compile(DECLARES_TEXT.pattern.encode())
# An assignment to a module global of the first form (core/export/targets.py reads them).
_GLOBALS = re.compile(r"^(?:model|example_args|example_kwargs|dynamic_shapes|strict|memory_budget)[ \t]*(?::[^=\n]*)?=(?!=)", re.M)


def declares(text: str, names: Iterable[str] = ()) -> bool:
    """``text`` (a notebook's code cell) declares a target, or assigns one of the
    module globals a declaration is made of, or defines one of ``names`` (the
    functions ``pyproject.toml`` entries name)."""
    if DECLARES_TEXT.search(text) or _GLOBALS.search(text):
        return True
    return any(re.search(rf"^(?:(?:async[ \t]+)?def|class)[ \t]+{re.escape(n)}\b|^{re.escape(n)}[ \t]*=(?!=)", text, re.M) for n in names)
