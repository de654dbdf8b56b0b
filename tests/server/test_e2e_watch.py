"""A local module a model imports changes on disk: the open model is exported again."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.server.lsp_client import EXAMPLES, Doc, running_server

pytestmark = pytest.mark.asyncio


def atomic_write(path: Path, text: str) -> None:
    """How editors and formatters save: a temporary file renamed over the original."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


async def test_changing_a_helper_on_disk_re_diagnoses_the_model(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLES / "pyproject_target", project)
    models, layers = project / "pkg" / "models.py", project / "pkg" / "layers.py"
    good_layers = layers.read_text()
    # The cache is on, as users run it: an edit landing while a result is stored must
    # not file the old result under the new bytes (it did, now and then, before the
    # cache keyed entries by the bytes the export read).
    async with running_server("visual-studio-code", project, {"cache": True}) as (client, _):
        doc = Doc(client, models)
        doc.open()
        assert await client.diagnostics_for(doc.uri, 1) == []  # declared in pyproject.toml
        seen = len(client.publishes(doc.uri))

        # Break the helper: the model fails when it runs, at its own line.
        assert "return x + torch.relu(self.linear(x))" in good_layers
        atomic_write(layers, good_layers.replace("return x + torch.relu(self.linear(x))", "return x + torch.relu(self.linear(x))[:, :2]"))
        published = await client.until(lambda: client.publishes(doc.uri)[seen:], "a new export after the helper changed")
        assert published[0].version == 1  # the buffer did not change: same version, new result
        status = await client.command("exportlens.status", doc.uri)
        assert [d.code for d in published[0].diagnostics] == ["eager-error"], (status, [m.message for m in client.log_messages])
        seen += len(published)

        atomic_write(layers, good_layers)
        fixed = await client.until(lambda: [p for p in client.publishes(doc.uri)[seen:] if len(p.diagnostics) == 0], "the model clean again", timeout=60)
        assert fixed[0].version == 1
