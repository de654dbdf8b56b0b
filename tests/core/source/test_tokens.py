"""The token key: comments and blank lines do not change it, anything Python runs
does; the line map follows every line of code; introspecting files are flagged."""

from __future__ import annotations

import pytest

from exportlens.core.source import tokens
from exportlens.core.source.tokens import line_map, reads_own_source, token_key

BASE = b'''"""A model."""
import torch


class M(torch.nn.Module):
    def forward(self, x):  # the step
        s = """two
lines"""
        return x.sin() + (1 +
                          2)
'''


@pytest.mark.parametrize(
    "edited",
    [
        b"# header\n" + BASE,
        BASE.replace(b"import torch\n", b"import torch\n\n\n# more\n"),
        BASE.replace(b"# the step", b"# another note"),
        BASE.replace(b"(1 +\n", b"(1 +  # inside brackets\n\n"),
        BASE.replace(b"\n", b"\r\n"),
        BASE + b"\n\n# trailing\n",
    ],
)
def test_comment_and_blank_line_edits_keep_the_key(edited: bytes) -> None:
    assert token_key(edited) == token_key(BASE)


@pytest.mark.parametrize(
    "edited",
    [
        BASE.replace(b"x.sin()", b"x.cos()"),
        BASE.replace(b'"""A model."""', b'"""A modal."""'),  # docstrings are values
        BASE.replace(b"x.sin() +", b"x.sin()+"),  # columns move: diagnostics' columns would
        BASE.replace(b"        return", b"\treturn"),  # indentation is a token
        BASE.replace(b"lines", b"  lines"),  # inside a string
        BASE.replace(b"(1 +\n                          2)", b"(1 + 2)"),  # two lines of code become one
        b"# -*- coding: latin-1 -*-\n" + BASE,  # a cookie is a comment that matters
    ],
)
def test_code_edits_change_the_key(edited: bytes) -> None:
    assert token_key(edited) != token_key(BASE)


def test_the_line_map_follows_every_line_of_code() -> None:
    moved = BASE.replace(b"class M", b"# one\n\n# two\nclass M")
    m = line_map(BASE, moved)
    assert m is not None and not m.changed
    assert m.lines[5] == 8 and m.lines[6] == 9
    # both rows of the multi-line string and of the bracketed expression move
    assert (m.lines[7], m.lines[8], m.lines[9], m.lines[10]) == (10, 11, 12, 13)
    assert m.lines[1] == 1 and 4 not in m.lines  # a blank line has no image


def test_a_changed_trailing_comment_is_reported() -> None:
    m = line_map(BASE, BASE.replace(b"# the step", b"# renamed"))
    assert m is not None and m.changed == {6}


def test_no_map_between_different_code() -> None:
    assert line_map(BASE, BASE.replace(b"sin", b"cos")) is None
    assert line_map(BASE, b"def (:\n") is None


@pytest.mark.parametrize(
    "source",
    [
        b"import inspect\n",
        b"import sys\nline = sys._getframe().f_lineno\n",
        b"print(__file__)\n",
        b"f = torch.jit.script(g)\n",
        b"import logging\nlogging.basicConfig(format='%(lineno)d')\n",
        b"x = (1,\n",  # does not tokenize: bytes only
    ],
)
def test_files_that_can_see_their_own_lines_are_flagged(source: bytes) -> None:
    assert reads_own_source(source)


def test_an_ordinary_model_is_not_flagged() -> None:
    assert not reads_own_source(BASE)


def test_a_text_is_tokenized_once_however_often_it_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A save asks for the same text's tokens several times (the edit's check, the
    cache's lookup and its store, the next edit's check): Python's tokenizer runs once
    per text, equal bytes from any caller (a bytearray too) give the same answer, and
    another text is tokenized for itself."""
    tokens._tokenized.cache_clear()
    calls = []
    real = tokens.tokenize.tokenize
    monkeypatch.setattr(tokens.tokenize, "tokenize", lambda readline: (calls.append(1), real(readline))[1])
    text = BASE + b"# a text no other test tokenizes\n"
    first = tokens.tokens_of(text)
    assert first is not None and len(calls) == 1
    assert tokens.tokens_of(bytes(bytearray(text))) == first and tokens.token_key(bytearray(text)) == first.key
    assert line_map(text, text) is not None and reads_own_source(text) is False
    assert len(calls) == 1
    other = text.replace(b"x.sin()", b"x.cos()")
    assert tokens.token_key(other) != first.key
    assert len(calls) == 2

    # A text too large to keep is tokenized each time (and still right).
    big = text + b"# padding\n" * (tokens.MEMO_MAX // 10)
    assert tokens.token_key(big) == tokens.token_key(big) == first.key
    assert len(calls) == 4
