"""A Jupyter notebook through the real server, synced as VS Code syncs one (LSP
3.17's notebook documents: the notebook, its cells, a text document per cell).

The notebook (``tests/notebooks.py``) has markdown between code cells, a line magic,
a shell escape, a helper in one cell whose data-dependent branch fails the model
declared in another, and a training cell after the model, which must never run.
The error is published on the helper's cell at its line in the cell; hover works
on a cell; editing the cell clears the error; a markdown edit exports nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from tests.notebooks import FIXED_HELPER, HELPER_CELL, HELPER_LINE, MODEL_CELL, MODEL_CELLS, write_notebook
from tests.server.lsp_client import RecordingClient, running_server

pytestmark = pytest.mark.asyncio


class Notebook:
    """An open notebook whose cells are in step with the server, as VS Code keeps them."""

    def __init__(self, client: RecordingClient, path: Path) -> None:
        self.client, self.path, self.uri = client, path, path.as_uri()
        self.texts = [text for _, text in MODEL_CELLS]
        self.kinds = [kind for kind, _ in MODEL_CELLS]
        self.cells = [f"vscode-notebook-cell:{path}#W{i}sZmlsZQ%3D%3D" for i in range(len(MODEL_CELLS))]
        self.version = 0

    def open(self) -> None:
        self.version = 1
        cells = [types.NotebookCell(kind=types.NotebookCellKind.Code if k == "code" else types.NotebookCellKind.Markup, document=u) for k, u in zip(self.kinds, self.cells, strict=True)]
        documents = [types.TextDocumentItem(uri=u, language_id="python" if k == "code" else "markdown", version=1, text=t) for k, u, t in zip(self.kinds, self.cells, self.texts, strict=True)]
        self.client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(types.NotebookDocument(uri=self.uri, notebook_type="jupyter-notebook", version=1, cells=cells), documents))

    def edit(self, number: int, text: str) -> None:
        """Replace cell ``number``'s text (1-based), as typing in it does."""
        self.version += 1
        self.texts[number - 1] = text
        change = types.NotebookDocumentCellContentChanges(
            document=types.VersionedTextDocumentIdentifier(uri=self.cells[number - 1], version=self.version),
            changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
        event = types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(text_content=[change]))
        self.client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(types.VersionedNotebookDocumentIdentifier(version=self.version, uri=self.uri), event))

    def save(self) -> None:
        self.client.notebook_document_did_save(types.DidSaveNotebookDocumentParams(types.NotebookDocumentIdentifier(uri=self.uri)))

    def close(self) -> None:
        self.client.notebook_document_did_close(types.DidCloseNotebookDocumentParams(types.NotebookDocumentIdentifier(uri=self.uri), [types.TextDocumentIdentifier(uri=u) for u in self.cells]))

    async def published(self, number: int, want: int | None = None) -> list[types.Diagnostic]:
        """The last diagnostics published on cell ``number``, once there are ``want``
        of them (any number when None) after the publish count seen so far."""
        uri = self.cells[number - 1]

        def found() -> list[types.Diagnostic] | None:
            shown = self.client.publishes(uri)
            if not shown or (want is not None and len(shown[-1].diagnostics) != want):
                return None
            return list(shown[-1].diagnostics) or [None]  # type: ignore[list-item]

        got = await self.client.until(found, f"{want} diagnostics on cell {number}")
        return [d for d in got if d is not None]


def _applied(text: str, edits: list[types.TextEdit]) -> str:
    """``text`` with LSP edits applied (ASCII text: UTF-16 units are characters)."""
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        start = offsets[e.range.start.line] + e.range.start.character
        end = offsets[e.range.end.line] + e.range.end.character
        text = text[:start] + e.new_text + text[end:]
    return text


def _describes(client: RecordingClient) -> int:
    return sum("runs code cells" in m.message for m in client.log_messages)


async def test_a_notebook_s_error_is_on_its_cell_and_an_edit_of_the_cell_clears_it(tmp_path: Path) -> None:
    write_notebook(tmp_path / "nb.ipynb")
    async with running_server("visual-studio-code+notebooks", tmp_path, {"cache_dir": str(tmp_path / ".cache")}) as (client, init):
        sync = init.capabilities.notebook_document_sync
        assert sync is not None and sync.save
        nb = Notebook(client, tmp_path / "nb.ipynb")
        nb.open()
        [d] = await nb.published(HELPER_CELL, 1)
        assert (d.code, d.range.start.line, d.range.start.character) == ("data-dependent", HELPER_LINE - 1, 4)
        assert d.range.end.line == HELPER_LINE - 1
        assert all(not p.diagnostics for n in range(1, len(MODEL_CELLS) + 1) if n != HELPER_CELL for p in client.publishes(nb.cells[n - 1]))
        assert not (tmp_path / "TRAINED").exists()  # the training cell after the model never ran

        # Hover on the model's class in its cell names the target.
        hover = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(nb.cells[MODEL_CELL - 1]), types.Position(0, 7)))
        assert hover is not None and "Net" in str(hover.contents)
        assert hover.range is None or hover.range.start.line == 0
        # Nothing of the export is in a markdown cell.
        assert await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(nb.cells[0]), types.Position(0, 2))) is None

        # The verified quick fix, asked on the helper's cell, edits that cell in its own lines.
        assert await client.fixes_verified(nb.uri, 1) >= 1
        context = types.CodeActionContext(diagnostics=[d], only=[types.CodeActionKind.QuickFix])
        actions = await client.text_document_code_action_async(types.CodeActionParams(types.TextDocumentIdentifier(nb.cells[HELPER_CELL - 1]), d.range, context))
        [preferred] = [a for a in actions or [] if isinstance(a, types.CodeAction) and a.is_preferred]
        assert preferred.edit is not None and preferred.edit.document_changes is not None
        [change] = preferred.edit.document_changes
        assert isinstance(change, types.TextDocumentEdit) and change.text_document.uri == nb.cells[HELPER_CELL - 1]
        fixed = _applied(nb.texts[HELPER_CELL - 1], [e for e in change.edits if isinstance(e, types.TextEdit)])
        assert fixed == FIXED_HELPER

        exports = _describes(client)
        nb.edit(1, "# Another title")  # markdown: the module is the same, nothing is exported
        nb.edit(len(MODEL_CELLS), "train(model, epochs=3)")  # after the model: the same
        nb.edit(HELPER_CELL, fixed)  # the fix, applied in its cell
        assert await nb.published(HELPER_CELL, 0) == []
        assert _describes(client) == exports + 1  # one export: the fixed helper's
        hints = await client.text_document_inlay_hint_async(
            types.InlayHintParams(types.TextDocumentIdentifier(nb.cells[MODEL_CELL - 1]), types.Range(types.Position(0, 0), types.Position(3, 0)))
        )
        assert all(0 <= h.position.line < 3 for h in hints or [])
        nb.save()
        nb.close()
        await client.until(lambda: all(client.publishes(u) and not client.publishes(u)[-1].diagnostics for u in nb.cells), "every cell cleared")
        assert not (tmp_path / "TRAINED").exists()


async def test_a_client_that_pulls_gets_each_cell_s_diagnostics(tmp_path: Path) -> None:
    write_notebook(tmp_path / "nb.ipynb")
    async with running_server("vscode-pull+notebooks", tmp_path, {"cache_dir": str(tmp_path / ".cache")}) as (client, _):
        nb = Notebook(client, tmp_path / "nb.ipynb")
        nb.open()

        async def pulled(number: int) -> list[types.Diagnostic]:
            report = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(types.TextDocumentIdentifier(nb.cells[number - 1])))
            return list(getattr(report, "items", []))

        [d] = await pulled(HELPER_CELL)
        assert (d.code, d.range.start.line) == ("data-dependent", HELPER_LINE - 1)
        assert await pulled(MODEL_CELL) == [] and await pulled(1) == []
