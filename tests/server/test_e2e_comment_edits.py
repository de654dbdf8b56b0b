"""Through the real server: comment lines inserted above a target move every
diagnostic and hover with the code, and no export runs (no work-done progress, which
every worker export reports); a code edit then exports again."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lsprotocol import types

from tests.server.lsp_client import EXAMPLES, Doc, RecordingClient, running_server

pytestmark = pytest.mark.asyncio


def _shape(diagnostics: list[types.Diagnostic], shift: int = 0) -> list[tuple[str, int, int, int, int, str, list[int]]]:
    return sorted(
        (
            str(d.code),
            d.range.start.line - shift,
            d.range.start.character,
            d.range.end.line - shift,
            d.range.end.character,
            d.message,
            [r.location.range.start.line for r in d.related_information or []],
        )
        for d in diagnostics
    )


async def _hover(client: RecordingClient, doc: Doc, line: int, column: int) -> str:
    found = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(doc.uri), doc.position(line, column)))
    assert found is not None and isinstance(found.contents, types.MarkupContent), (line, column)
    return found.contents.value


async def test_comment_lines_move_diagnostics_and_hovers_without_an_export(tmp_path: Path) -> None:
    for name in ("counter.py", "data_dependent.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    async with running_server("visual-studio-code", tmp_path, {"cache_dir": str(tmp_path / "cache")}) as (client, _):
        gate = Doc(client, tmp_path / "data_dependent.py")
        gate.open()
        before = await client.diagnostics_for(gate.uri, 1)
        assert any(d.code == "data-dependent" for d in before)
        counter = Doc(client, tmp_path / "counter.py")
        counter.open()
        await client.diagnostics_for(counter.uri, 1)
        line = counter.line_of("self.steps.add_(1)")
        column = counter.text.split("\n")[line].index("steps")
        hover_before = await _hover(client, counter, line, column)
        assert "BUFFER_MUTATION" in hover_before
        exports = len(client.progress_reports)
        assert exports == 2  # one export per file so far

        moved_gate = gate.replace("class Gate", "# one\n\n# two\nclass Gate")
        moved_counter = counter.replace("    def forward", "    # a note\n\n    def forward")
        after = await client.diagnostics_for(gate.uri, moved_gate)
        await client.diagnostics_for(counter.uri, moved_counter)
        assert _shape(after, shift=3) == _shape(before)
        hover_after = await _hover(client, counter, line + 2, column)
        assert "BUFFER_MUTATION" in hover_after
        assert len(client.progress_reports) == exports  # no export ran for either edit
        status = await client.command("exportlens.status", gate.uri)
        assert status["cached"] is True

        # What a real export says of the moved text is exactly what was shown.
        await client.command("exportlens.reexport", gate.uri)
        fresh = client.publishes(gate.uri)[-1].diagnostics
        assert _shape(fresh) == _shape(after)
        assert len(client.progress_reports) == exports + 1

        # A code edit is never served from the cache.
        edited = gate.replace("x = x + 1", "x = x + 2")
        await client.diagnostics_for(gate.uri, edited)
        assert len(client.progress_reports) == exports + 2


async def test_a_typed_comment_edit_does_not_wait_for_the_typing_pause(tmp_path: Path) -> None:
    """The debounce is for code edits, whose export costs seconds: a didChange that
    only touches comments and blank lines is answered from the cache at once. With a
    one-minute debounce, its moved diagnostics must arrive well before it would end."""
    shutil.copy(EXAMPLES / "data_dependent.py", tmp_path / "data_dependent.py")
    async with running_server("visual-studio-code", tmp_path, {"cache_dir": str(tmp_path / "cache"), "debounce_ms": 60_000}) as (client, _):
        gate = Doc(client, tmp_path / "data_dependent.py")
        gate.open()
        before = await client.diagnostics_for(gate.uri, 1)
        exports = len(client.progress_reports)
        moved = gate.replace("class Gate", "# typed, not saved\n\nclass Gate")
        after = await client.diagnostics_for(gate.uri, moved, timeout=30)
        assert _shape(after, shift=2) == _shape(before)
        assert len(client.progress_reports) == exports  # from the cache, no export

