"""Moving a notebook module's LSP answers into its cells (``server/notebook_cells.py``),
without a server: what no cell holds is dropped."""

from __future__ import annotations

from lsprotocol import types

from tests.notebooks import HELPER_CELL, MODEL_CELLS


def test_moving_places_into_cells_drops_what_no_cell_holds() -> None:
    """``to_cell`` on the module's answers: a range in another cell is dropped, an edit
    across cells or on a neutralised magic line makes no action, a deleted cell's
    URI is gone from the view."""
    from exportlens.core.project.notebooks import read_cells
    from exportlens.server.notebook_cells import build, to_cell
    from tests.notebooks import notebook_json

    cells = read_cells(notebook_json(MODEL_CELLS))
    uris = [f"cell:{i}" for i in range(len(cells))]
    doc = types.NotebookDocument(
        uri="file:///nb.ipynb",
        notebook_type="jupyter-notebook",
        version=1,
        cells=[types.NotebookCell(kind=types.NotebookCellKind.Code if c.kind == "code" else types.NotebookCellKind.Markup, document=u) for c, u in zip(cells, uris, strict=True)],
    )
    view = build(doc, {u: (c.text, "python" if c.kind == "code" else "markdown") for u, c in zip(uris, cells, strict=True)}, "/nb.ipynb")
    helper = uris[HELPER_CELL - 1]
    first = view.module.line_of(HELPER_CELL, 1)
    assert first is not None
    at = first - 1  # 0-based module line of the helper's first line

    def edit(start: int, end: int, end_char: int = 0) -> types.CodeAction:
        text_edit = types.TextEdit(types.Range(types.Position(start, 0), types.Position(end, end_char)), "x")
        change = types.TextDocumentEdit(types.OptionalVersionedTextDocumentIdentifier(uri=view.uri, version=1), [text_edit])
        return types.CodeAction(title="fix", edit=types.WorkspaceEdit(document_changes=[change]))

    [inside] = to_cell([edit(at + 1, at + 2)], view, helper)
    [change] = inside.edit.document_changes
    assert change.text_document.uri == helper and change.edits[0].range.start.line == 1
    assert to_cell([edit(at + 3, at + 4)], view, helper)[0].edit.document_changes[0].edits[0].range.end.line == 4  # the cell's end
    assert to_cell([edit(at + 3, at + 5, 2)], view, helper) == []  # into the next cell: no action
    magic = view.module.line_of(2, 1) - 1  # "%matplotlib inline", run as "pass  # %matplotlib inline"
    assert to_cell([edit(magic, magic, 3)], view, uris[1]) == []
    assert to_cell([types.InlayHint(position=types.Position(magic, 0), label="x")], view, helper) == []  # another cell's
    hover = types.Hover(contents="x", range=types.Range(types.Position(magic, 0), types.Position(magic, 1)))
    assert to_cell(hover, view, helper) is None
