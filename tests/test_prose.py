"""README and docs/ read at a glance: short sentences on average, almost none over 60
words, short table cells (``scripts/prose.py`` says what counts and prints the
offenders: ``python scripts/prose.py README.md docs/*.md``)."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("prose", ROOT / "scripts" / "prose.py")
assert _spec is not None and _spec.loader is not None
prose = importlib.util.module_from_spec(_spec)
sys.modules["prose"] = prose
_spec.loader.exec_module(prose)

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]  # the decision records too
# Sentences over prose.LONG words allowed across all pages: a handful that a list
# would not make shorter (a command's whole usage line reads as one).
LONG_ALLOWED = 5


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_page_reads_at_a_glance(page: Path) -> None:
    sentences, cells = prose.read(page.read_text())
    words = [s.words for s in sentences]
    assert statistics.mean(words) <= prose.MEAN, f"{page.name}: mean sentence {statistics.mean(words):.1f} words"
    wide = [f"{page.name}:{c.line}: {c.chars} characters" for c in cells if c.chars > prose.CELL]
    assert wide == []


def test_almost_no_sentence_is_long() -> None:
    long = [f"{page.name}:{s.line}: {s.words} words" for page in PAGES for s in prose.read(page.read_text())[0] if s.words > prose.LONG]
    assert len(long) <= LONG_ALLOWED, long
    every = [s.words for page in PAGES for s in prose.read(page.read_text())[0]]
    assert statistics.mean(every) <= prose.MEAN


def test_the_measure_sees_what_it_should() -> None:
    text = (
        "# A heading that is not prose\n\n"
        "One short sentence. Another, with `a --long code span` as one word, e.g. this.\n"
        "- a list item is its own sentence\n\n"
        "```sh\nexportlens check a very long command that is code and is never counted as prose at all\n```\n\n"
        "| a | b |\n|---|---|\n| " + "x" * 250 + " | `a|b` |\n"
    )
    sentences, cells = prose.read(text)
    assert [s.words for s in sentences] == [3, 8, 7]
    assert [c.chars for c in cells] == [1, 1, 250, 5]
