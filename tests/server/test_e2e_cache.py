"""A cached result survives a server restart: reopening publishes without an export."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli
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
        # Served from the cache: no export ran (each reports work-done progress). The
        # worker may be warming all the same: the workspace has a model file.
        assert status["cached"] is True and status["workers"] in ("not-started", "starting", "ready")
        assert client.progress_reports == {}
        # An edit that the cache has not seen needs a worker after all.
        edited = doc.replace("add_(1)", "add_(2)")
        assert codes(await client.diagnostics_for(doc.uri, edited)) == first
        status = await client.command("exportlens.status", doc.uri)
        assert status["cached"] is False and status["workers"] in ("ready", "busy")


async def test_the_server_uses_the_pyproject_cache_dir_that_check_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No cacheDir in the editor and no $EXPORTLENS_CACHE_DIR: the editor's results go
    to ``[tool.exportlens] cache_dir``, where ``exportlens check`` then finds them
    (the server once wrote to the user cache folder instead)."""
    monkeypatch.delenv("EXPORTLENS_CACHE_DIR", raising=False)  # the session's; the server inherits os.environ
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.exportlens]\ncache_dir = ".exportlens-cache"\n')
    path = project / "counter.py"
    shutil.copy(EXAMPLES / "counter.py", path)

    async with running_server("neovim", project, {}) as (client, _):
        doc = Doc(client, path)
        doc.open()
        await client.diagnostics_for(doc.uri, 1)
    # The server has exited, so its io thread has finished the store.
    assert len(list((project / ".exportlens-cache").glob("??/*.entry"))) == 1
    assert not (tmp_path / "xdg" / "exportlens").exists()

    proc = run_cli("check", str(path), env={"EXPORTLENS_CACHE_DIR": None, "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert "(1 file from the cache)" in proc.stdout, proc.stdout + proc.stderr
