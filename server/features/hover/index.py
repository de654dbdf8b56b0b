"""The hover index: ``textDocument/hover`` answered from memory, no worker round trip.

Built once per export result from the file's text and its :class:`FileResult`; a
hover is then a dict hit on the line and a bisect among that line's disjoint
segments. What each place shows is decided in
:mod:`exportlens.server.features.hover.anchors`; here the overlapping anchors are
painted into disjoint segments, the narrowest anchor under the cursor winning (``x``
inside a ``return`` shows ``x``). Positions are 0-based lines and UTF-16 code units;
``ast`` gives UTF-8 byte columns, converted once at build time.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from exportlens.core.model.results import FileResult
from exportlens.server.features.hover import text as md
from exportlens.server.features.hover.anchors import collect
from exportlens.server.markup import Markup
from exportlens.server.positions import LineSpan

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HoverText:
    text: str  # in the markup the index was built for
    line: int  # 0-based
    start: int  # UTF-16 code units, the hovered word/span
    end: int


@dataclass(frozen=True)
class _Segments:
    """One line's disjoint ``[start, end)`` segments, sorted, each with its hover."""

    starts: list[int]
    ends: list[int]
    hovers: list[HoverText]


class HoverIndex:
    def __init__(self, markup: Markup, lines: dict[int, _Segments] | None = None) -> None:
        self.markup = markup  # what every text of the index is written in
        self._lines = lines or {}

    @classmethod
    def build(cls, path: str, source: str, result: FileResult, markup: Markup) -> HoverIndex:
        """The hovers of ``result``, written in ``markup`` (the client's). Never raises:
        a part that cannot be built is left out (and logged)."""
        try:
            anchors = collect(path, source, result, markup)
            return cls(markup, _segments(anchors.sections, markup))
        except Exception:  # a hover index must never take the server down
            log.exception("hover index for %s could not be built", path)
            return cls(markup)

    def hover(self, line: int, character: int) -> HoverText | None:
        segments = self._lines.get(line)
        if segments is None:
            return None
        i = bisect.bisect_right(segments.starts, character) - 1
        if i < 0 or character >= segments.ends[i]:
            return None
        return segments.hovers[i]

    def __len__(self) -> int:
        """How many segments the index holds (for tests and logs)."""
        return sum(len(s.starts) for s in self._lines.values())


def _segments(sections: dict[LineSpan, dict[str, None]], markup: Markup) -> dict[int, _Segments]:
    """Each line's anchors, every target's view of a span joined into one hover."""
    by_line: dict[int, list[tuple[LineSpan, HoverText]]] = {}
    for span, texts in sections.items():
        hover = HoverText(md.join_sections(markup, list(texts)), span.line, span.start, span.end)
        by_line.setdefault(span.line, []).append((span, hover))
    return {line: _paint(anchors) for line, anchors in by_line.items()}


def _paint(anchors: Sequence[tuple[LineSpan, HoverText]]) -> _Segments:
    """Overlapping anchors as disjoint segments; the narrowest anchor wins each piece."""
    bounds = sorted({s.start for s, _ in anchors} | {s.end for s, _ in anchors})
    starts: list[int] = []
    ends: list[int] = []
    hovers: list[HoverText] = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        best: tuple[LineSpan, HoverText] | None = None
        for span, hover in anchors:
            if span.start <= lo and hi <= span.end:
                if best is None or (span.end - span.start, -span.start) < (best[0].end - best[0].start, -best[0].start):
                    best = (span, hover)
        if best is None:
            continue
        if hovers and ends[-1] == lo and hovers[-1] is best[1]:
            ends[-1] = hi
            continue
        starts.append(lo)
        ends.append(hi)
        hovers.append(best[1])
    return _Segments(starts, ends, hovers)
