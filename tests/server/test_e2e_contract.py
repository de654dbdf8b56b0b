"""The export contract in the editor, through the real server and a real LSP client:
``signature-changed`` appears as you type, at the ``return`` line, before any CI run,
and goes away when the snapshot on disk is updated (written by the real command)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lsprotocol import types

from tests.conftest import run_cli
from tests.server.lsp_client import Doc, running_server
from tests.workspaces import CONTRACT_MODEL as MODEL

pytestmark = pytest.mark.asyncio



def changes(diagnostics: list[types.Diagnostic]) -> list[tuple[int, types.DiagnosticSeverity | None, str]]:
    return sorted((d.range.start.line, d.severity, d.message.split("\n")[0]) for d in diagnostics if d.code == "signature-changed")


async def test_signature_changed_as_you_type_and_cleared_by_a_new_snapshot(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 120\n")
    model = project / "mlp.py"
    model.write_text(MODEL)
    assert run_cli("snapshot", cwd=project).returncode == 0
    async with running_server("visual-studio-code", project, {"cacheDir": str(tmp_path / "cache")}) as (client, _):
        doc = Doc(client, model)
        doc.open()
        assert changes(await client.diagnostics_for(doc.uri, 1)) == []

        wider = doc.replace("nn.Linear(16, 4)", "nn.Linear(16, 6)")
        found = changes(await client.diagnostics_for(doc.uri, wider))
        assert (doc.line_of("return self.fc2(h)"), types.DiagnosticSeverity.Error, "output 0: float32[batch, 4] -> float32[batch, 6]") in found
        assert (doc.line_of("self.fc2 = "), types.DiagnosticSeverity.Error, "parameter `fc2.weight`: float32[4, 16] -> float32[6, 16]") in found

        widened = doc.replace("nn.Linear(16, 6)", "nn.Linear(16, 4)")
        widened = doc.replace("max=32", "max=64")
        assert changes(await client.diagnostics_for(doc.uri, widened)) == [
            (doc.line_of("def forward(self, x)"), types.DiagnosticSeverity.Information, "input `x`: float32[batch, 8] (batch in [1, 32]) -> float32[batch, 8] (batch in [1, 64])"),
        ]

        # Record the edit from a terminal: the open file is checked again, clean. (The
        # file is written as the editor's buffer holds it, but not saved through the
        # editor: only the snapshot's change can cause the new check.)
        seen = len(client.publishes(doc.uri))
        model.write_text(doc.text)
        proc = run_cli("snapshot", cwd=project)
        assert proc.returncode == 0 and "changed: mlp.py: TinyMLP" in proc.stdout
        await client.until(
            lambda: [p for p in client.publishes(doc.uri)[seen:] if p.version == widened and not changes(list(p.diagnostics))],
            "the diagnostics again after the snapshot was written",
        )
        # And a snapshot deleted: nothing to compare, nothing reported.
        seen = len(client.publishes(doc.uri))
        os.unlink(project / "exportlens.snapshot.json")
        published = await client.until(lambda: client.publishes(doc.uri)[seen:], "a publish after the snapshot was deleted")
        assert changes(list(published[-1].diagnostics)) == []
