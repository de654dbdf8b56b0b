"""``textDocument/hover``: InputSpec/OutputSpec hovers from the in-memory index.

The hover feature is this package: ``anchors`` decides what each place of the file
shows, ``text`` writes it (in the client's markup: markdown, or plain text for a
client that does not take it), ``index`` holds it for lookups; this module is the
LSP handler. The index (:class:`HoverIndex`) is built once per result, off the hot
path, for the exact text the result was made from. A hover never waits for a
worker. When the buffer has changed since, the index still answers for a line
whose text is unchanged; any other line gets no hover (its positions may have moved).
The index speaks 0-based lines and UTF-16 columns; the client may have negotiated
another encoding, so columns are converted on the way in and out.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from exportlens.server.features.hover.index import HoverIndex
from exportlens.server.markup import content
from exportlens.server.positions import UTF16, convert, split_lines

if TYPE_CHECKING:
    from exportlens.server.host import Host
    from exportlens.server.state import DocumentState

log = logging.getLogger(__name__)

INDEX_WAIT_S = 2.0


def index_class() -> type[HoverIndex]:
    """The index class the exports build for each result."""
    return HoverIndex


def hover_at(state: DocumentState, current_lines: list[str], position: types.Position, encoding: str) -> types.Hover | None:
    index = state.index
    line = position.line
    if index is None or not state.line_unchanged(current_lines, line):
        return None  # the line changed since the export: its columns may not match
    text = current_lines[line]
    found = index.hover(line, convert(text, position.character, encoding, UTF16))
    if found is None:
        return None
    found_text = state.result_lines[found.line] if 0 <= found.line < len(state.result_lines) else text
    return types.Hover(
        contents=content(index.markup, found.text),
        range=types.Range(
            types.Position(found.line, convert(found_text, found.start, UTF16, encoding)),
            types.Position(found.line, convert(found_text, found.end, UTF16, encoding)),
        ),
    )


def register(server: Host) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: Host, params: types.HoverParams) -> types.Hover | None:
        try:
            state = ls.documents.get(params.text_document.uri)
            if state is None:
                return None
            if state.index is None and state.index_task is not None and not state.index_task.done():
                # Diagnostics were just published and the index is a moment away: wait for it.
                await asyncio.wait({state.index_task}, timeout=INDEX_WAIT_S)
            if state.index is None:
                return None
            document = ls.workspace.get_text_document(params.text_document.uri)
            encoding = str(ls.workspace.position_encoding or "utf-16")
            return hover_at(state, split_lines(document.source), params.position, encoding)
        except Exception:
            log.exception("hover failed")
            return None
