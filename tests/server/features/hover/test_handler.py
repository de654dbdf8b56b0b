"""The hover handler's wiring: index lookups on unchanged lines, columns converted
to and from the client's encoding, with no server process."""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types

from exportlens.core.model.results import FileResult
from exportlens.server.features.hover import hover_at
from exportlens.server.markup import MARKDOWN
from exportlens.server.positions import UTF8, UTF16, split_lines
from exportlens.server.state import DocumentState

TEXT = 'class M:\n    def forward(self, x):\n        s = "€€"; self.steps.add_(1)\n        return x\n'
LINES = split_lines(TEXT)


@dataclass(frozen=True)
class FakeHover:
    text: str
    line: int
    start: int
    end: int


class FakeIndex:
    """Answers on line 2 between the UTF-16 columns of ``self.steps``; records queries."""

    def __init__(self) -> None:
        self.queries: list[tuple[int, int]] = []
        self.markup = MARKDOWN
        line = LINES[2]
        self.start = line.index("self.steps")
        self.end = self.start + len("self.steps")

    def hover(self, line: int, character: int) -> FakeHover | None:
        self.queries.append((line, character))
        if line == 2 and self.start <= character < self.end:
            return FakeHover("**steps**", 2, self.start, self.end)
        return None


def state_with(index: FakeIndex) -> DocumentState:
    return DocumentState(uri="file:///m.py", path="/m.py", result=FileResult("/m.py"), result_lines=list(LINES), index=index)


def test_hover_answers_from_the_index_and_converts_columns() -> None:
    index = FakeIndex()
    state = state_with(index)
    byte_col = len(LINES[2][: index.start].encode())
    hover = hover_at(state, LINES, types.Position(2, byte_col + 2), UTF8)  # the client counts UTF-8
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.kind == types.MarkupKind.Markdown and hover.contents.value == "**steps**"
    assert index.queries == [(2, index.start + 2)]  # the index got UTF-16
    assert hover.range is not None and hover.range.start == types.Position(2, byte_col)


def test_hover_after_an_edit_only_on_unchanged_lines() -> None:
    index = FakeIndex()
    state = state_with(index)
    shifted = ["# a new first line"] + LINES  # every line moved down by one
    assert hover_at(state, shifted, types.Position(2, index.start), UTF16) is None
    edited_elsewhere = list(LINES)
    edited_elsewhere[0] = "class Renamed:"
    assert hover_at(state, edited_elsewhere, types.Position(2, index.start), UTF16) is not None
    assert hover_at(state, LINES, types.Position(40, 0), UTF16) is None
    assert hover_at(DocumentState(uri="u", path="/m.py"), LINES, types.Position(2, index.start), UTF16) is None
