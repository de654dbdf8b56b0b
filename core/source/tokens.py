"""A Python file as Python runs it: its tokens without comments and line breaks. Torch-free.

Why: an edit that only adds, removes or changes comments, or adds or removes blank
lines, cannot change what the file does -- only where its lines are. The result
cache keys on :func:`token_key` instead of the bytes, and :func:`line_map` says
where each line of code went, so a cached result can be served with its lines moved
instead of running the export again (``exportlens.core.cache.remap``).

What the key keeps, and why each is needed for "same tokens => same behaviour":

* every token but ``COMMENT`` and ``NL`` (the line breaks inside brackets and of
  blank or comment-only lines), with its type and its exact text (an ``INDENT``'s
  whitespace, a string's quotes and escapes, a docstring);
* each token's start and end column and how many lines it spans, and whether it
  starts on the line of the token before it: a diagnostic's columns then stay right
  without mapping, and each line of code maps to exactly one line;
* the ``ENCODING`` the bytes declare (a coding cookie is a comment that matters).

It drops what a logical line cannot observe: where ``NEWLINE`` tokens are and what
they are spelled with (``\\n`` or ``\\r\\n``, which Python reads as ``\\n`` inside
strings too). Code that looks at its own source or
line numbers (``inspect``, ``linecache``, ``traceback``, frames, code objects,
``__file__``, TorchScript which reads source and its ``# type:`` comments) *can* see
the difference; :func:`reads_own_source` finds the names such code needs, and the
cache then keys that file by its bytes.
"""

from __future__ import annotations

import functools
import hashlib
import io
import tokenize
from dataclasses import dataclass

# Names through which code sees its own source text or line numbers. A file (or a
# local module it imports) that spells one of these is keyed by its bytes. Broad on
# purpose: a false alarm costs one export, a miss would serve a wrong result.
_INTROSPECTION_NAMES = frozenset(
    {
        "inspect",
        "linecache",
        "traceback",
        "tokenize",
        "dis",
        "getsource",
        "getsourcelines",
        "getframeinfo",
        "currentframe",
        "_getframe",
        "stack",
        "f_lineno",
        "f_code",
        "f_back",
        "tb_lineno",
        "tb_frame",
        "co_firstlineno",
        "co_lines",
        "co_positions",
        "co_lnotab",
        "co_linetable",
        "__code__",
        "__file__",
        "__loader__",
        "__spec__",
        "jit",  # torch.jit.script reads the source (and its # type: comments)
        "script",
        "get_source",
        "getlineno",
    }
)
# Strings that ask for line numbers without a name above (a logging format).
_INTROSPECTION_TEXT = ("lineno", "linecache", "f_lineno")


@dataclass(frozen=True)
class Tokens:
    """A file's kept tokens: the key, and for each kept token its first row and
    how many rows it spans (parallel lists, in order)."""

    key: str
    rows: tuple[int, ...]
    spans: tuple[int, ...]
    introspects: bool


# The same text is asked for several times per save: the server's check of an edit
# (``same_tokens``), then the cache's lookup and store of the export it starts, then
# the next edit's check against it. Python 3.11's tokenizer is pure Python (~1 ms for
# a small model file, a few under load, on the way to the export): each text once.
# ``Tokens`` is immutable; the cache is thread-safe and keyed by the bytes' equality.
# A text over ``MEMO_MAX`` is not kept (the server's memory: 8 of them at most).
MEMO_MAX = 1 << 20


def _kept(data: bytes) -> Tokens | None:
    """Tokenize ``data``; None when Python's tokenizer refuses it (such a file gets a
    syntax error, which is keyed by its bytes)."""
    data = data if type(data) is bytes else bytes(data)
    return _tokenized(data) if len(data) <= MEMO_MAX else _tokenized.__wrapped__(data)


@functools.lru_cache(maxsize=8)
def _tokenized(data: bytes) -> Tokens | None:
    h = hashlib.sha256()
    rows: list[int] = []
    spans: list[int] = []
    introspects = False
    last_row = 0
    try:
        for tok in tokenize.tokenize(io.BytesIO(data).readline):
            if tok.type in (tokenize.COMMENT, tokenize.NL):
                continue
            (row, col), (end_row, end_col) = tok.start, tok.end
            text = tok.string.replace("\r\n", "\n")  # Python reads \r\n as \n, in strings too
            if tok.type == tokenize.NEWLINE:  # after a trailing comment, or \r\n: not code
                text, col, end_col = "", 0, 0
            same_line = row == last_row
            if tok.type == tokenize.NAME and tok.string in _INTROSPECTION_NAMES:
                introspects = True
            elif tok.type == tokenize.STRING and any(t in tok.string for t in _INTROSPECTION_TEXT):
                introspects = True
            record = f"{tok.type}\x00{col}\x00{end_col}\x00{end_row - row}\x00{int(same_line)}\x00"
            h.update(record.encode() + text.encode("utf-8", errors="surrogatepass") + b"\x01")
            rows.append(row)
            spans.append(end_row - row)
            last_row = end_row
    except (tokenize.TokenError, SyntaxError, UnicodeError, ValueError):
        return None
    return Tokens(h.hexdigest(), tuple(rows), tuple(spans), introspects)


def tokens_of(data: bytes) -> Tokens | None:
    """The kept tokens of a file's bytes, or None when they do not tokenize."""
    return _kept(data)


def token_key(data: bytes) -> str | None:
    """The sha256 (hex) of ``data``'s tokens without comments and blank lines, or
    None when they do not tokenize (key such a file by its bytes)."""
    kept = _kept(data)
    return kept.key if kept is not None else None


def reads_own_source(data: bytes) -> bool:
    """Whether the file spells a name through which code may see its own source or
    line numbers (then only its exact bytes may reuse a result). True when it does
    not tokenize."""
    kept = _kept(data)
    return kept is None or kept.introspects


@dataclass(frozen=True)
class LineMap:
    """Where each line of code of the old text is in the new one (1-based), and the
    old lines whose text changed on the way (a trailing comment edited)."""

    lines: dict[int, int]
    changed: frozenset[int]
    # Whether the (shared) code spells a way to see its own source: see ``reads_own_source``.
    introspects: bool = False

    def moved(self) -> bool:
        return any(a != b for a, b in self.lines.items())


def line_map(old: bytes, new: bytes) -> LineMap | None:
    """The line map from ``old`` to ``new`` when both have the same kept tokens,
    else None. Lines without tokens (comments, blank lines) are not in it."""
    a, b = _kept(old), _kept(new)
    if a is None or b is None or a.key != b.key or len(a.rows) != len(b.rows):
        return None
    lines: dict[int, int] = {}
    for row_a, row_b, span in zip(a.rows, b.rows, a.spans, strict=True):
        for k in range(span + 1):  # every row of a multi-line string moves with it
            lines.setdefault(row_a + k, row_b + k)
    old_lines, new_lines = _split(old), _split(new)
    changed = frozenset(
        n for n, m in lines.items() if _line(old_lines, n) != _line(new_lines, m)
    )
    return LineMap(lines, changed, b.introspects)


def _split(data: bytes) -> list[str]:
    return data.decode("utf-8", errors="replace").splitlines()


def _line(lines: list[str], n: int) -> str:
    return lines[n - 1] if 0 < n <= len(lines) else ""


def old_line_text(old: bytes, n: int) -> str:
    """Line ``n`` of ``old`` (1-based), without its line break."""
    return _line(_split(old), n)
