"""The server with the plainest LSP client that Helix, Zed, Emacs (eglot), Sublime
Text's LSP package or LSP4IJ may be: push diagnostics only (no pull), no work-done
progress, no ``workspace/configuration``, UTF-16 positions only (no
``general.positionEncodings``). It must work without ever asking for what the
client did not offer, with columns counted in UTF-16 code units."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from lsprotocol import types

from tests.server.lsp_client import SERVE, Doc, make_client

MODEL = """import torch


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("步数", torch.zeros(1))

    def forward(self, x):
        self.步数.add_(1)
        return x * 2


model = Counter()
example_args = (torch.randn(3),)
"""

PLAIN = types.ClientCapabilities(
    text_document=types.TextDocumentClientCapabilities(
        synchronization=types.TextDocumentSyncClientCapabilities(did_save=True),
        publish_diagnostics=types.PublishDiagnosticsClientCapabilities(related_information=True),
        hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.PlainText]),
    ),
)


@pytest.mark.asyncio
async def test_a_push_only_utf16_client_without_progress_or_configuration(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / "counter.py"
    path.write_text(MODEL, encoding="utf-8")
    asked: list[str] = []
    client = make_client(asked)
    await client.start_io(sys.executable, *SERVE, env=dict(os.environ, PYTHONWARNINGS="ignore"), cwd=tmp_path)
    try:
        result = await client.initialize_session(types.InitializeParams(capabilities=PLAIN, root_uri=tmp_path.as_uri(), initialization_options={"exportlens": {}}))
        assert result.capabilities.position_encoding in (None, types.PositionEncodingKind.Utf16)
        assert result.capabilities.diagnostic_provider is None  # nothing to pull from: it pushes

        doc = Doc(client, path)
        found = await client.diagnostics_for(doc.uri, doc.open())
        [mutation] = [d for d in found if d.code == "mutation/buffer"]
        line = doc.line_of("self.步数.add_(1)")
        # UTF-16 code units: 步 and 数 are one unit each (three bytes each in UTF-8).
        assert (mutation.range.start.line, mutation.range.start.character) == (line, 8)
        assert (mutation.range.end.line, mutation.range.end.character) == (line, 8 + len("self.步数.add_(1)"))

        hover = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(doc.uri), types.Position(line, 8 + len("self.步数.ad"))))
        assert hover is not None and "BUFFER_MUTATION" in str(hover.contents)

        version = doc.replace("return x * 2", "return x * 3")  # an edit: pushed again
        doc.save()
        again = await client.diagnostics_for(doc.uri, version)
        assert [d.code for d in again] == ["mutation/buffer"]
    finally:
        await client.shutdown_session()
        await client.stop()
    # Nothing the client did not offer was ever asked of it.
    assert not {types.WORKSPACE_CONFIGURATION, types.WINDOW_WORK_DONE_PROGRESS_CREATE, types.PROGRESS, types.WORKSPACE_DIAGNOSTIC_REFRESH} & set(asked), asked
