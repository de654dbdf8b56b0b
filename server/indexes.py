"""The hover index and the inlay hints of a result (a document's own, or a model
module's view), built in a thread off the event loop, then attached if still current.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from exportlens.core.model.results import FileResult
from exportlens.server.features.hints import HintIndex
from exportlens.server.features.hover import index_class
from exportlens.server.features.refresh import HINTS, LENSES, refresh

if TYPE_CHECKING:
    from exportlens.server.host import Host
    from exportlens.server.state import DocumentState

log = logging.getLogger(__name__)


async def build_index(server: Host, state: DocumentState, text: str, result: FileResult) -> None:
    """Build the hover index and the inlay hints for ``result`` in a thread, then
    attach them if still current and ask the client for hints and lenses again."""
    cls = index_class()
    if cls is None:
        return

    def build() -> tuple[object, HintIndex]:
        markup = server.client.markup
        return cls.build(state.path, text, result, markup), HintIndex.build(state.path, text, result, markup)

    try:
        index, hints = await asyncio.get_running_loop().run_in_executor(server.threads.io, build)
    except Exception as e:  # noqa: BLE001 - no hovers is better than a dead server
        server.log_once(f"building hovers failed ({type(e).__name__}: {e}); hovers are off for this result")
        log.exception("HoverIndex.build failed for %s", state.path)
        return
    if state.result is result:
        state.index, state.hints = index, hints
        refresh(server, HINTS, LENSES)
