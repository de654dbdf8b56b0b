"""The unsaved text of the project's open local modules, for an export.

The declaring file is exported from its buffer; a local module it imports
(``mymodels/blocks.py``) would be read from the disk, so typing in it showed nothing
until it was saved. Every export of a model file therefore carries the buffers of the
project's other open Python documents whose text is not what the disk holds
(``ExportRequest.overlays``): the job imports each from that text
(``core/export/loader``), records that text's state, and the cache keys the result by
it (``core/cache/keys.states_now``) -- never under the module's state on disk.

A module open but unchanged adds nothing: the export reads the same bytes from the
disk, and the result stays shareable with ``check``.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

from exportlens.core.disk.states import file_state, overlay_text_state
from exportlens.core.project.files import root_of

if TYPE_CHECKING:
    from exportlens.server.host import Host
    from exportlens.server.state import DocumentState


def _saved_text(path: str) -> str | None:
    """The file as an editor's buffer holds it (no BOM, line endings as saved)."""
    try:
        with open(path, encoding="utf-8-sig", errors="strict", newline="") as f:
            return f.read()
    except (OSError, UnicodeError):
        return None


def _unsaved(candidates: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Of ``(real path, buffer text)``, those whose buffer is not the file (on the
    lookup thread: it is on a save's path, as the cache lookup after it)."""
    return tuple((path, text) for path, text in candidates if os.path.isfile(path) and _saved_text(path) != text)


async def for_export(server: Host, path: str) -> tuple[tuple[str, str], ...]:
    """``(real path, text)`` of every open ``.py`` document of ``path``'s project, other
    than ``path`` itself, whose buffer differs from the file on disk."""
    real, root = os.path.realpath(path), os.path.realpath(root_of(path)) + os.sep
    candidates = []
    for state in list(server.documents.values()):
        other = os.path.realpath(state.path)
        if other == real or not other.endswith(".py") or not other.startswith(root):
            continue
        candidates.append((other, server.workspace.get_text_document(state.uri).source))
    if not candidates:
        return ()
    return await asyncio.get_running_loop().run_in_executor(server.threads.lookups, _unsaved, candidates)


def state_of(server: Host, state: DocumentState, text: str) -> str | None:
    """The state an export sees of the open module ``state`` whose buffer is ``text``:
    its text's when that is not the file's, else the file's (on the io thread)."""
    saved = _saved_text(state.path)
    if saved is not None and saved == text:
        return file_state(state.path)
    return overlay_text_state(text)
