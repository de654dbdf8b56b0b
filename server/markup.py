"""The markup every ``MarkupContent`` the server sends is written in: markdown, or
plain text for a client that does not take markdown.

Hover and inlay-hint tooltips are written once per result through one of these two
writers (:data:`MARKDOWN`, :data:`PLAIN`), chosen from the client's capabilities at
``initialize`` (``exportlens.server.client``). Both say the same thing: a table is
a fenced ``text`` block in markdown and the same aligned lines in plain text; a title
is bold in markdown and just the words in plain text. Plain text never holds markdown
syntax of the server's own making (fences, ``**``, code spans, ``---`` rules):
eglot without markdown-mode shows the characters as they are, and Vim's ALE would
try to highlight a fenced block with a syntax file named after its language.

Torch-free and LSP-free but for the kind each writer names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from lsprotocol import types

_BACKTICKS = re.compile(r"`+")


class Markup(Protocol):
    kind: types.MarkupKind

    def bold(self, text: str) -> str: ...
    def code(self, text: str) -> str: ...
    def block(self, lines: Sequence[str]) -> str: ...
    def rule(self) -> str: ...


class Markdown:
    kind = types.MarkupKind.Markdown

    def bold(self, text: str) -> str:
        return f"**{text}**"

    def code(self, text: str) -> str:
        """``text`` as an inline code span, whatever backticks it holds."""
        longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
        ticks = "`" * (longest + 1)
        pad = " " if text.startswith("`") or text.endswith("`") else ""
        return f"{ticks}{pad}{text}{pad}{ticks}"

    def block(self, lines: Sequence[str]) -> str:
        """A fenced ``text`` block (Neovim's hover float draws no pipe tables); the
        fence outgrows any backtick run inside."""
        longest = max((len(m) for line in lines for m in _BACKTICKS.findall(line)), default=0)
        ticks = "`" * max(3, longest + 1)
        return "\n".join([f"{ticks}text", *lines, ticks])

    def rule(self) -> str:
        return "---"


class PlainText:
    kind = types.MarkupKind.PlainText

    def bold(self, text: str) -> str:
        return text

    def code(self, text: str) -> str:
        return text

    def block(self, lines: Sequence[str]) -> str:
        return "\n".join(lines)

    def rule(self) -> str:
        return "─" * 32


MARKDOWN: Markup = Markdown()
PLAIN: Markup = PlainText()


def content(markup: Markup, value: str) -> types.MarkupContent:
    return types.MarkupContent(kind=markup.kind, value=value)
