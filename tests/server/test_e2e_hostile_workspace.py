"""A workspace file named like a library the server imports (``tokenize.py``,
``attr.py``, ``msgpack.py``, ``typing_extensions.py``) must not kill the server: the
editors start it in the workspace folder, which ``python -m`` puts first on
``sys.path``. The model there still imports its own local helper module."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.lsp_client import SERVE, Doc, running_server
from tests.workspaces import hostile_workspace

pytestmark = [pytest.mark.asyncio, pytest.mark.adversarial]



@pytest.mark.parametrize("serve", [SERVE, ("-m", "exportlens", "serve")], ids=["editor-command", "without-P"])
async def test_the_server_starts_and_exports_in_a_workspace_that_shadows_its_libraries(tmp_path: Path, serve: tuple[str, ...]) -> None:
    model = hostile_workspace(tmp_path)
    async with running_server("neovim", tmp_path, {"cache": False}, serve=serve, cwd=tmp_path) as (client, result):
        assert result.server_info is not None and result.server_info.name == "exportlens"
        doc = Doc(client, model)
        doc.open()
        # No diagnostic at all: the export ran and found ``helpers`` next to the model.
        assert await client.diagnostics_for(doc.uri, 1) == []
        status = await client.command("exportlens.status", doc.uri)
        assert status["state"] == "ok" and [t["status"] for t in status["targets"]] == ["ok"]
