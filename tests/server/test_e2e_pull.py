"""Pull diagnostics (``textDocument/diagnostic``) for a client that supports pull and
refresh, as today's VS Code does: no pushes, result ids, Unchanged reports."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import AsyncIterator

import pytest
import pytest_asyncio
from lsprotocol import types

from tests.server.lsp_client import EXAMPLES, Doc, RecordingClient, running_server

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def session(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[RecordingClient, types.InitializeResult, Path]]:
    workspace = tmp_path_factory.mktemp("ws-pull")
    async with running_server("vscode-pull", workspace, {"cache_dir": str(workspace / ".cache")}) as (client, result):
        yield client, result, workspace


async def pull(client: RecordingClient, doc: Doc, previous: str | None = None) -> types.DocumentDiagnosticReport:
    return await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(doc.uri), previous_result_id=previous)
    )


async def test_pull_reports_and_result_ids(session: tuple[RecordingClient, types.InitializeResult, Path]) -> None:
    client, result, workspace = session
    provider = result.capabilities.diagnostic_provider
    assert isinstance(provider, types.DiagnosticOptions) and provider.identifier == "exportlens"
    path = workspace / "counter.py"
    shutil.copy(EXAMPLES / "counter.py", path)
    doc = Doc(client, path)
    doc.open()
    # The pull waits for the export of the buffer as it is now.
    first = await pull(client, doc)
    assert isinstance(first, types.RelatedFullDocumentDiagnosticReport)
    assert [(d.code, d.range.start.line) for d in first.items] == [("mutation/buffer", doc.line_of("self.steps.add_(1)"))]
    assert first.result_id is not None and first.result_id.startswith(f"{doc.uri}@1:")
    same = await pull(client, doc, first.result_id)
    assert isinstance(same, types.RelatedUnchangedDocumentDiagnosticReport) and same.result_id == first.result_id

    broken = doc.replace("return x + self.steps", "return x + torch.ones(5)")
    changed = await pull(client, doc, first.result_id)
    assert isinstance(changed, types.RelatedFullDocumentDiagnosticReport)
    assert changed.result_id is not None and changed.result_id.startswith(f"{doc.uri}@{broken}:")
    assert [d.range.start.line for d in changed.items if d.code == "eager-error"] == [doc.line_of("torch.ones(5)")]
    # The server asked the client to pull again after each export, and never pushed.
    assert client.diagnostic_refresh_count >= 2
    assert client.publishes(doc.uri) == []


async def test_pull_for_an_unknown_document_is_empty(session: tuple[RecordingClient, types.InitializeResult, Path]) -> None:
    client, _, workspace = session
    path = workspace / "never_opened.py"
    path.write_text("x = 1\n")
    report = await pull(client, Doc(client, path))
    assert isinstance(report, types.RelatedFullDocumentDiagnosticReport) and len(report.items) == 0
