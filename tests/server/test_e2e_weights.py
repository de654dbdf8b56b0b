"""Through the real server: a model built with fake weights says so (hover, lens), its
export reports its phases as work-done progress, and repeated layers read as one row
in the hover and the graph view."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from tests.server.lsp_client import Doc, running_server

pytestmark = pytest.mark.asyncio

MODEL = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return x + self.lin(x).relu()


class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(6))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


model = Deep()
example_args = (torch.randn(2, 16),)
"""


async def test_fake_weights_phases_and_repeated_layers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXPORTLENS_FAKE_MIN_BYTES", "0")  # the server's workers inherit it
    (tmp_path / "deep.py").write_text(MODEL)
    async with running_server("visual-studio-code", tmp_path, {"cache": False}) as (client, _):
        doc = Doc(client, tmp_path / "deep.py")
        doc.open()
        assert await client.diagnostics_for(doc.uri, 1) == []

        hover = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(doc.uri), types.Position(doc.line_of("class Deep"), 7)))
        assert hover is not None and isinstance(hover.contents, types.MarkupContent)
        text = hover.contents.value
        assert "Built with fake weights" in text, text
        [row] = [line for line in text.splitlines() if "blocks_{0..5}_lin_weight" in line]
        assert "target='blocks.{0..5}.lin.weight'" in row and row.rstrip().endswith("×6"), row

        lenses = await client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(doc.uri)))
        status = lenses[0].command
        assert status is not None and " · fake weights · " in status.title, status.title

        view = await client.command("exportlens.graph", doc.uri)
        rows = view["text"].split("\n")
        assert rows[0].startswith("# Deep: ") and "repeated layers' as one row each" in rows[0], rows[0]
        [linear] = [r for r in rows if " aten.linear.default " in r]
        assert linear.split()[0] == "linear…linear_5" and "×6" in linear, linear

        # The export said what it was doing, phase by phase.
        reports = [getattr(r, "message", "") or "" for token in client.progress_reports.values() for r in token]
        for phase in ("running the file", "building the model: Deep", "tracing: Deep", "decompositions: Deep"):
            assert any(phase in message for message in reports), (phase, reports)
