"""A cached result survives a server restart: reopening publishes without a worker."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.server.lsp_client import EXAMPLES, Doc, codes, running_server

pytestmark = pytest.mark.asyncio


async def test_reopen_after_restart_is_served_from_the_cache(tmp_path: Path) -> None:
    options = {"cache_dir": str(tmp_path / "cache")}
    path = tmp_path / "counter.py"
    shutil.copy(EXAMPLES / "counter.py", path)

    async with running_server("visual-studio-code", tmp_path, options) as (client, _):
        doc = Doc(client, path)
        doc.open()
        first = codes(await client.diagnostics_for(doc.uri, 1))
        status = await client.command("exportlens.status", doc.uri)
        assert status["cached"] is False and status["workers"] in ("ready", "busy")

    async with running_server("neovim", tmp_path, options) as (client, _):
        doc = Doc(client, path)
        doc.open()
        assert codes(await client.diagnostics_for(doc.uri, 1)) == first
        status = await client.command("exportlens.status", doc.uri)
        # Served from the cache: no worker process was ever started by this server.
        assert status["cached"] is True and status["workers"] == "not-started"
        assert not any("worker" in m.message and "starting" in m.message for m in client.log_messages)
        assert client.progress_reports == {}
        # An edit that the cache has not seen needs a worker after all.
        edited = doc.replace("add_(1)", "add_(2)")
        assert codes(await client.diagnostics_for(doc.uri, edited)) == first
        status = await client.command("exportlens.status", doc.uri)
        assert status["cached"] is False and status["workers"] in ("ready", "busy")
