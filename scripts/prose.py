"""How a page reads at a glance: sentence lengths and table cells of Markdown prose.

    python scripts/prose.py README.md docs/*.md docs/*/*.md

prints, per file and in all, the sentences, their mean length in words, those over
``LONG`` words, and the table cells over ``CELL`` characters, each with its line.
``tests/test_prose.py`` holds README and docs/ to ``MEAN`` and ``LONG``.

What counts as prose: paragraphs and list items. Fenced code, headings, tables
(measured as cells instead), images, HTML and front matter do not. An inline code
span counts as one word (``--memory-budget SIZE`` is one thing to read), a link as
its text. A sentence ends at ``.``, ``!`` or ``?`` followed by a space and a capital,
a backtick, a quote or a bracket, and at the end of a paragraph or list item; not
after ``e.g.``, ``i.e.``, ``vs.``, ``etc.`` or ``cf.``. Only the standard library.
"""

from __future__ import annotations

import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

MEAN = 25.0  # the most a file's (and all files') mean sentence may run, in words
LONG = 60  # a sentence over this many words is long
CELL = 200  # a table cell over this many characters is long

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE = re.compile(r"`+[^`]*`+")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_ABBREVIATIONS = re.compile(r"\b(e\.g|i\.e|vs|etc|cf)\.", re.I)
_END = re.compile(r"(?<=[.!?])[)\"']?\s+(?=[A-Z`\"'(\[*_0-9])")
_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s+")


@dataclass(frozen=True)
class Sentence:
    line: int
    words: int
    text: str


@dataclass(frozen=True)
class Cell:
    line: int
    chars: int
    text: str


def read(text: str) -> tuple[list[Sentence], list[Cell]]:
    """The sentences and table cells of a Markdown text."""
    sentences: list[Sentence] = []
    cells: list[Cell] = []
    block: list[tuple[int, str]] = []

    def flush() -> None:
        if block:
            sentences.extend(_sentences(block))
            block.clear()

    fenced = False
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":  # front matter
        end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), 0)
        lines = [""] * (end + 1) + lines[end + 1 :]
    for n, line in enumerate(lines, 1):
        if _FENCE.match(line):
            flush()
            fenced = not fenced
            continue
        stripped = line.strip()
        if fenced:
            continue
        if not stripped or stripped.startswith(("#", "<", "![", ">")) or re.fullmatch(r"[-=*_ ]{3,}", stripped):
            flush()
            continue
        if stripped.startswith("|"):
            flush()
            if not re.fullmatch(r"[|:\- ]+", stripped):
                cells += [Cell(n, len(c.strip()), c.strip()) for c in _split_row(stripped)]
            continue
        if _ITEM.match(line):
            flush()
            line = _ITEM.sub("", line, count=1)
        block.append((n, line.strip()))
    flush()
    return sentences, cells


def _split_row(row: str) -> list[str]:
    """A table row's cells (a ``|`` inside a code span or escaped is the cell's)."""
    protected = _CODE.sub(lambda m: m.group(0).replace("|", "\0"), row.replace("\\|", "\0"))
    return [c.replace("\0", "|") for c in protected.strip().strip("|").split("|")]


def _sentences(block: list[tuple[int, str]]) -> list[Sentence]:
    first = block[0][0]
    text = " ".join(line for _, line in block)
    text = _CODE.sub("CODE", text)
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _ABBREVIATIONS.sub(lambda m: m.group(1).replace(".", "") + "", text)
    out = []
    for part in _END.split(text):
        words = len(part.split())
        if words:
            out.append(Sentence(first, words, part))
    return out


def report(paths: list[Path]) -> int:
    every: list[int] = []
    for path in paths:
        sentences, cells = read(path.read_text())
        words = [s.words for s in sentences]
        every += words
        long = [s for s in sentences if s.words > LONG]
        wide = [c for c in cells if c.chars > CELL]
        mean = statistics.mean(words) if words else 0.0
        print(f"{path}: {len(words)} sentences, mean {mean:.1f} words, {len(long)} over {LONG}, {len(wide)} table cells over {CELL} characters")
        for s in long:
            print(f"  {path}:{s.line}: {s.words} words: {s.text[:100]}...")
        for c in wide:
            print(f"  {path}:{c.line}: a cell of {c.chars} characters: {c.text[:80]}...")
    if every:
        print(f"all: {len(every)} sentences, mean {statistics.mean(every):.1f} words, {sum(w > LONG for w in every)} over {LONG}")
    return 0


if __name__ == "__main__":
    sys.exit(report([Path(p) for p in sys.argv[1:]]))
