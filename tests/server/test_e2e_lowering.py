"""The editor's ``lower`` setting through the real server: an op with no ONNX
translation is an error at the line that calls it, and the target's hover says what
lowering found (a clean model: "Lowers to ONNX ..., outputs match")."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lsprotocol import types

from tests.server.lsp_client import Doc, RecordingClient, codes, running_server

pytestmark = pytest.mark.asyncio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lowering"


async def _hover(client: RecordingClient, doc: Doc, line: int) -> str:
    """The hover at ``line`` (0-based), column 2."""
    hover = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(doc.uri), types.Position(line, 2)))
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    return str(hover.contents.value)


async def test_lower_setting_reports_the_untranslatable_line_and_hover_shows_the_lowering(tmp_path: Path) -> None:
    for name in ("untranslatable.py", "clean.py"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    (tmp_path / "pyproject.toml").write_text("")
    async with running_server("neovim", tmp_path, {"lower": ["onnx"], "cache": False}) as (client, _):
        weird = Doc(client, tmp_path / "untranslatable.py")
        weird.open()
        found = await client.diagnostics_for(weird.uri, 1)
        assert codes(found) == [("lowering/onnx-unsupported", weird.line_of("z = weird(y)")), ("lowering/onnx-unsupported", weird.line_of("w = weird(z.cos())"))]
        assert all("exportlens_test::weird" in d.message for d in found)
        text = await _hover(client, weird, weird.line_of("class Weird"))
        assert "Does not lower to ONNX: an op has no translation" in text, text

        clean = Doc(client, tmp_path / "clean.py")
        clean.open()
        assert codes(await client.diagnostics_for(clean.uri, 1)) == []
        text = await _hover(client, clean, clean.line_of("class Net"))
        assert "Lowers to ONNX (opset " in text and "outputs match (max error" in text, text
        assert "sum_1  float32  max abs" in text
        # The target's code lens says it too, and opens the graph.
        lenses = await client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(clean.uri)))
        onnx = [lens.command for lens in lenses or [] if lens.command is not None and lens.command.title.startswith("ONNX")]
        assert len(onnx) == 1 and onnx[0].title.startswith("ONNX ✓ opset ") and onnx[0].title.endswith(" nodes"), onnx
        assert onnx[0].command == "exportlens.graph"
        lenses = await client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(weird.uri)))
        assert [lens.command.title for lens in lenses or [] if lens.command is not None and lens.command.title.startswith("ONNX")] == ["ONNX ✗ unsupported"]
