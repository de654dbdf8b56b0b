"""Notebook document sync (LSP 3.17): ``notebookDocument/didOpen``, ``didChange``,
``didSave`` and ``didClose``, and the requests a client asks of a notebook's cells.

pygls keeps the notebook and its cells' text documents in the workspace; these
handlers then make the notebook's module (``exportlens.server.notebooks``) the text
of a document at the notebook's URI and export it as any buffer is: at once when
opened or saved, after the debounce when edited. An edit that leaves the module's
text as it was (markdown, a cell after the last target, a skipped cell) exports
nothing; it may still move cells, so the diagnostics are published again.
"""

from __future__ import annotations

import functools
import inspect
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls import uris

from exportlens.server import notebooks, verification
from exportlens.server.features import diagnostics
from exportlens.server.features.documents import guarded
from exportlens.server.state import DocumentState

if TYPE_CHECKING:
    from exportlens.server.host import Host

log = logging.getLogger(__name__)

# Every notebook type whose cells are Python: Jupyter's, VS Code's interactive window.
SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[types.NotebookDocumentFilterWithNotebook(notebook="*", cells=[types.NotebookCellLanguage(language="python")])],
    save=True,
)
# The requests on a cell that are asked of its notebook's module.
MAPPED = (types.TEXT_DOCUMENT_HOVER, types.TEXT_DOCUMENT_INLAY_HINT, types.TEXT_DOCUMENT_CODE_LENS, types.TEXT_DOCUMENT_CODE_ACTION)


def view_of_cell(server: Host, cell_uri: str) -> notebooks.NotebookView | None:
    notebook = server.workspace.get_notebook_document(cell_uri=cell_uri)
    return server.notebooks.get(notebook.uri) if notebook is not None else None


def in_module(server: Host, uri: str, line: int | None = None) -> tuple[str, int | None]:
    """A notebook cell's URI and 0-based line as its notebook's URI and the module's
    line (None for a cell that does not run); any other URI and line as they are.
    For commands and notifications whose arguments name a document and a line."""
    if uri.startswith("file:"):
        return uri, line
    view = view_of_cell(server, uri)
    if view is None:
        return uri, line
    offset = view.offset(uri)
    return view.uri, (offset + line if offset is not None and line is not None else None)


def sync(server: Host, notebook_uri: str, *, delay: bool) -> None:
    """Rebuild the notebook's module from its cells; export it when its text changed."""
    notebook = server.workspace.get_notebook_document(notebook_uri=notebook_uri)
    if notebook is None:
        return
    texts = {c.document: server.workspace.get_text_document(c.document).source for c in notebook.cells}
    path = uris.to_fs_path(notebook_uri) or notebook_uri
    view = notebooks.build(notebook, texts, path)
    old = server.notebooks.get(notebook_uri)
    server.notebooks[notebook_uri] = view
    changed = old is None or old.module.text != view.module.text
    if changed:
        item = types.TextDocumentItem(uri=notebook_uri, language_id="python", version=notebook.version, text=view.module.text)
        server.workspace.put_text_document(item)
    state = server.documents.get(notebook_uri)
    if state is None:
        state = DocumentState(uri=notebook_uri, path=path, version=notebook.version)
        server.documents[notebook_uri] = state
        server.log_message(f"exportlens: {path}: {view.module.describe()}", types.MessageType.Log)
        server.watch_dependencies()
        server.scheduler.schedule(notebook_uri, delay=False)
    elif changed:
        state.version = notebook.version
        verification.cancel(state)
        server.log_message(f"exportlens: {path}: {view.module.describe()}", types.MessageType.Log)
        server.scheduler.schedule(notebook_uri, delay=delay)
    elif state.result is not None and (old is None or old.cell_uris != view.cell_uris or old.module.spans != view.module.spans):
        diagnostics.publish(server, state)  # the same module, its cells moved


def close(server: Host, notebook_uri: str, cell_uris: list[str]) -> None:
    server.scheduler.forget(notebook_uri)
    server.notebooks.pop(notebook_uri, None)
    closed = server.documents.pop(notebook_uri, None)
    if closed is not None:
        verification.cancel(closed)
        for uri in cell_uris:
            diagnostics.clear(server, uri)
        server.watch_dependencies()


def map_requests(server: Host, features: dict[str, Any]) -> None:
    """Wrap the handlers of ``MAPPED`` (pygls's registered features, by method) so that
    a request on a notebook cell is asked of the notebook's module and answered in
    the cell."""
    for method in MAPPED:
        handler = features.get(method)
        if handler is not None:
            features[method] = _on_cells(server, handler)


def _on_cells(server: Host, handler: Any) -> Any:
    @functools.wraps(handler)
    async def run(params: Any) -> Any:
        uri = params.text_document.uri
        view = view_of_cell(server, uri) if not uri.startswith("file:") else None
        if view is None:
            answer = handler(params)
            return await answer if inspect.isawaitable(answer) else answer
        asked = notebooks.to_module(params, view, uri)
        if asked is None:
            return None  # a cell that does not run: nothing of the export is there
        answer = handler(asked)
        result = await answer if inspect.isawaitable(answer) else answer
        return notebooks.to_cell(result, view, uri) if result is not None else None

    return run


def register(server: Host) -> None:
    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    @guarded("notebookDocument/didOpen")
    def did_open(ls: Host, params: types.DidOpenNotebookDocumentParams) -> None:
        if params.notebook_document.uri.startswith("file:"):
            sync(ls, params.notebook_document.uri, delay=False)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    @guarded("notebookDocument/didChange")
    def did_change(ls: Host, params: types.DidChangeNotebookDocumentParams) -> None:
        if params.notebook_document.uri in ls.notebooks:
            sync(ls, params.notebook_document.uri, delay=True)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    @guarded("notebookDocument/didSave")
    def did_save(ls: Host, params: types.DidSaveNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        state = ls.documents.get(uri)
        if state is None or uri not in ls.notebooks:
            return
        if ls.scheduler.expedite(uri) or ls.scheduler.busy(uri):
            return  # the pending export runs now / the running one is for this text
        if state.result_version != state.version or state.result is None:
            ls.scheduler.schedule(uri, delay=False)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    @guarded("notebookDocument/didClose")
    def did_close(ls: Host, params: types.DidCloseNotebookDocumentParams) -> None:
        view = ls.notebooks.get(params.notebook_document.uri)
        close(ls, params.notebook_document.uri, view.cell_uris if view is not None else [c.uri for c in params.cell_text_documents])
