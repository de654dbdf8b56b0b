"""The language server with a torch outside the supported range (issue 35): a model
file shows one ``unsupported-torch`` error on line 1 naming the version and the
command, the user gets one message box, and nothing runs (no worker, the model's
code not imported). Once a supported torch is installed, the next save exports.

The other torch is its metadata alone (``tests/e2e/test_torch_range.fake_torch``):
the server reads the version from there and never imports torch."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lsprotocol import types

from tests.e2e.test_torch_range import MODEL, fake_torch
from tests.server.lsp_client import Doc, children, running_server

pytestmark = pytest.mark.asyncio


async def test_an_unsupported_torch_is_said_and_nothing_runs_until_it_is_replaced(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "model.py").write_text(MODEL)
    fake = fake_torch(tmp_path / "site", "2.9.1")
    async with running_server("visual-studio-code", ws, {"cache_dir": str(tmp_path / "cache")}, env={"PYTHONPATH": str(fake)}) as (client, _):
        doc = Doc(client, ws / "model.py")
        version = doc.open()
        [notice] = await client.diagnostics_for(doc.uri, version)
        assert notice.code == "unsupported-torch" and notice.severity == types.DiagnosticSeverity.Error
        assert notice.range.start.line == 0
        assert "torch 2.9.1 is outside the range exportlens supports (torch>=2.10,<2.16" in notice.message
        assert "-m pip install 'torch>=2.10,<2.16'" in notice.message
        [shown] = await client.until(lambda: [m for m in client.messages if "torch 2.9.1" in m.message], "the message box")
        assert shown.type == types.MessageType.Error
        assert [m for m in client.log_messages if "no worker is warmed: torch 2.9.1" in m.message]
        # An edit: the notice again for the new version, still one message box, nothing ran.
        version = doc.replace("x * 2", "x * 3")
        [again] = await client.diagnostics_for(doc.uri, version)
        assert again.code == "unsupported-torch"
        assert len([m for m in client.messages if "torch 2.9.1" in m.message]) == 1
        assert client._server is not None and children(client._server.pid) == set()
        assert not (ws / "ran.txt").exists()
        # The user installs a supported torch (here: the fake goes, the venv's own is
        # found) and saves: the file exports, with no restart.
        shutil.rmtree(fake / "torch-2.9.1.dist-info")
        doc.save()
        exported = await client.until(lambda: [p for p in client.publishes(doc.uri) if p.version == version and not any(d.code == "unsupported-torch" for d in p.diagnostics)], "the export after the save")
        assert exported and (ws / "ran.txt").exists()
        status = await client.command("exportlens.status", doc.uri)
        assert [t["status"] for t in status["targets"]] == ["ok"], status
