"""Notebooks in the server: an open notebook is exported as the module of its code
cells (``core/project/notebooks.py``), under the notebook's own URI, and every
place the server sends is moved to the cell it is in.

The client syncs a notebook as LSP 3.17's notebook documents: the notebook, its
cells, and a text document per cell. The server keeps one text document of its own
for the notebook, at the notebook's URI, holding the module's text: exports,
results, indexes, hovers and hints work on it exactly as on a ``.py`` file's buffer.
Only the edges know about cells: a request on a cell's URI is asked of the module
(its positions moved down by the lines of the cells before it), and what comes
back (ranges, positions, diagnostics, edits) is moved back into the cell its line
is in, or dropped when that is another cell. Diagnostics are published per cell.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import attrs
from lsprotocol import types

from exportlens.core.project import notebooks
from exportlens.core.project.notebooks import Cell, NotebookModule

log = logging.getLogger(__name__)


@dataclasses.dataclass
class NotebookView:
    """One open notebook: its cells' URIs in order and the module they make."""

    uri: str  # the notebook's
    path: str
    cell_uris: list[str]  # by cell number - 1, every kind
    module: NotebookModule

    def cell_uri(self, number: int) -> str | None:
        return self.cell_uris[number - 1] if 1 <= number <= len(self.cell_uris) else None

    def number_of(self, cell_uri: str) -> int | None:
        try:
            return self.cell_uris.index(cell_uri) + 1
        except ValueError:
            return None

    def offset(self, cell_uri: str) -> int | None:
        """The module line (0-based) of the cell's first line; None for a cell that
        does not run (markdown, skipped, after the last target)."""
        number = self.number_of(cell_uri)
        line = self.module.line_of(number, 1) if number is not None else None
        return line - 1 if line is not None else None

    def place(self, line0: int) -> tuple[str, int] | None:
        """The cell URI and 0-based line in it of a 0-based module line."""
        found = self.module.place(line0 + 1)
        if found is None:
            return None
        uri = self.cell_uri(found[0])
        return (uri, found[1] - 1) if uri is not None else None


def build(notebook: types.NotebookDocument, texts: dict[str, str], path: str) -> NotebookView:
    """The view of a synced notebook; ``texts``: each cell document's text by URI."""
    cells = [Cell("code" if c.kind == types.NotebookCellKind.Code else "markdown", texts.get(c.document, "")) for c in notebook.cells]
    module = notebooks.module_of(cells, notebooks.pyproject_names(path))
    return NotebookView(notebook.uri, path, [c.document for c in notebook.cells], module)


# -- moving places between a cell and the module ------------------------------------


def to_module(params: Any, view: NotebookView, cell_uri: str) -> Any:
    """Request params on a cell, as asked of the module: its URI, its lines moved down."""
    offset = view.offset(cell_uri)
    if offset is None:
        return None
    return _walk(params, lambda uri: view.uri if uri == cell_uri else uri, lambda line, uri: line + offset if uri in (None, cell_uri) else line)


def to_cell(result: Any, view: NotebookView, cell_uri: str) -> Any:
    """A result for the module, as seen from ``cell_uri``: every place in the module
    moved to its cell; an item of a list that lies in another cell is dropped."""
    return _Mover(view, cell_uri).move(result)


class _Mover:
    """Moves a module result into cells. A place without a URI of its own (a hover's
    range, a hint's position) belongs to the asking cell; one with the module's URI
    (a related location, an edit) goes to the cell its line is in."""

    def __init__(self, view: NotebookView, cell_uri: str) -> None:
        self.view, self.cell_uri = view, cell_uri

    def _here(self, line0: int) -> int | None:
        found = self.view.place(line0)
        return found[1] if found is not None and found[0] == self.cell_uri else None

    def move(self, value: Any) -> Any:
        if isinstance(value, list):
            out = []
            for item in value:
                moved = self.move(item)
                if moved is not _ELSEWHERE:
                    out.append(moved)
            return out
        if not attrs.has(type(value)):
            return value
        if isinstance(value, types.Position):
            line = self._here(value.line)
            return _ELSEWHERE if line is None else attrs.evolve(value, line=line)
        if isinstance(value, types.Range):
            start = self._here(value.start.line)
            if start is None:
                return _ELSEWHERE
            end = self._here(value.end.line)
            end_pos = attrs.evolve(value.end, line=end) if end is not None else types.Position(line=start + 1, character=0)
            return types.Range(start=attrs.evolve(value.start, line=start), end=end_pos)
        if isinstance(value, types.WorkspaceEdit):
            return self._workspace_edit(value)
        uri = getattr(value, "uri", None)
        if isinstance(uri, str):
            if uri != self.view.uri:
                return value  # a place in another file stays as it is
            if isinstance(getattr(value, "range", None), types.Range):
                return self._located(value)
        changes: dict[str, Any] = {}
        for f in attrs.fields(type(value)):
            item = getattr(value, f.name)
            moved = self.move(item)
            if moved is _ELSEWHERE:
                if f.name in ("range", "position"):
                    return _ELSEWHERE  # the item itself lies in another cell
                moved = None
            if moved is not item:
                changes[f.name] = moved
        return attrs.evolve(value, **changes) if changes else value

    def _workspace_edit(self, edit: types.WorkspaceEdit) -> types.WorkspaceEdit:
        """Edits of the module become edits of the cells their lines are in."""
        changes = None
        if edit.changes is not None:
            changes = {k: v for k, v in edit.changes.items() if k != self.view.uri}
            for cell, edits in self._by_cell(list(edit.changes.get(self.view.uri, []))).items():
                changes[cell] = [*changes.get(cell, []), *edits]
        document_changes: list[Any] | None = None
        if edit.document_changes is not None:
            document_changes = []
            for change in edit.document_changes:
                if isinstance(change, types.TextDocumentEdit) and change.text_document.uri == self.view.uri:
                    for cell, edits in self._by_cell([e for e in change.edits if isinstance(e, types.TextEdit)]).items():
                        document_changes.append(types.TextDocumentEdit(text_document=types.OptionalVersionedTextDocumentIdentifier(uri=cell, version=None), edits=list(edits)))
                else:
                    document_changes.append(change)
        return attrs.evolve(edit, changes=changes, document_changes=document_changes)

    def _by_cell(self, edits: list[types.TextEdit]) -> dict[str, list[types.TextEdit]]:
        out: dict[str, list[types.TextEdit]] = {}
        for e in edits:
            found = self.view.place(e.range.start.line)
            if found is None:
                continue
            shift = found[1] - e.range.start.line
            moved = types.Range(start=attrs.evolve(e.range.start, line=found[1]), end=attrs.evolve(e.range.end, line=e.range.end.line + shift))
            out.setdefault(found[0], []).append(attrs.evolve(e, range=moved))
        return out

    def _located(self, value: Any) -> Any:
        """A location in the module (``uri`` + ``range``) moved to its own cell."""
        found = self.view.place(value.range.start.line)
        if found is None:
            return _ELSEWHERE
        uri, line = found
        shift = line - value.range.start.line
        end = value.range.end
        return attrs.evolve(value, uri=uri, range=types.Range(start=attrs.evolve(value.range.start, line=line), end=attrs.evolve(end, line=end.line + shift)))


_ELSEWHERE = object()


def _walk(value: Any, uri_fn: Any, line_fn: Any, uri: str | None = None) -> Any:
    """``value`` with every URI field passed through ``uri_fn`` and every position's
    line through ``line_fn(line, uri of the enclosing object, None if it has none)``."""
    if isinstance(value, list):
        return [_walk(v, uri_fn, line_fn, uri) for v in value]
    if not attrs.has(type(value)):
        return value
    if isinstance(value, types.Position):
        return attrs.evolve(value, line=line_fn(value.line, uri))
    own = getattr(value, "uri", None)
    here = own if isinstance(own, str) else uri
    changes = {}
    for f in attrs.fields(type(value)):
        item = getattr(value, f.name)
        if f.name == "uri" and isinstance(item, str):
            new = uri_fn(item)
        else:
            new = _walk(item, uri_fn, line_fn, here)
        if new is not item:
            changes[f.name] = new
    return attrs.evolve(value, **changes) if changes else value


def diagnostics_by_cell(view: NotebookView, items: list[types.Diagnostic]) -> dict[str, list[types.Diagnostic]]:
    """The module's diagnostics, each in its cell (every cell of the notebook has a list,
    empty ones too: publishing an empty list clears a cell)."""
    out: dict[str, list[types.Diagnostic]] = {uri: [] for uri in view.cell_uris}
    for d in items:
        found = view.place(d.range.start.line)
        if found is None:
            continue
        moved = to_cell(d, view, found[0])
        if moved is not _ELSEWHERE:
            out[found[0]].append(moved)
    return out
