"""Through the real server: a workspace with a model file gets a warm worker at
``initialize``, before any document is opened, and the first open uses it; a
workspace without one starts no worker (torch costs ~400 MB) until an export needs it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.server.lsp_client import EXAMPLES, Doc, RecordingClient, children, running_server

pytestmark = pytest.mark.asyncio



def _logged(client: RecordingClient, pattern: str) -> list[str]:
    return [m.message for m in client.log_messages if re.search(pattern, m.message)]


async def test_a_model_workspace_has_a_warm_worker_before_the_first_open(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "notes.py").write_text("print('not a model')\n")
    shutil.copy(EXAMPLES / "counter.py", tmp_path / "pkg" / "counter.py")
    async with running_server("visual-studio-code", tmp_path, {"cache_dir": str(tmp_path / "cache")}) as (client, _):
        [ready] = await client.until(lambda: _logged(client, r"worker ready \(pid \d+"), "the worker warmed at initialize")
        assert client.published == []  # nothing was opened
        status = await client.command("exportlens.status", (tmp_path / "pkg" / "counter.py").as_uri())
        assert status["state"] == "idle" and status["workers"] == "ready"
        pid = int(re.search(r"pid (\d+)", ready).group(1))  # type: ignore[union-attr]
        assert client._server is not None
        assert pid in children(client._server.pid)  # a real process, the server's child
        assert _logged(client, r"warming a worker at start \(counter\.py declares targets\)")

        doc = Doc(client, tmp_path / "pkg" / "counter.py")
        doc.open()
        assert [d.code for d in await client.diagnostics_for(doc.uri, 1)] == ["mutation/buffer"]
        # The open used that worker: one start, no second pool.
        assert len(_logged(client, r"workers not-started -> starting")) == 1
        assert len(_logged(client, r"worker ready")) == 1


async def test_a_workspace_without_a_model_starts_no_worker_until_an_export(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "plain"\n')
    (tmp_path / "app.py").write_text("import os\n\nprint(os.getcwd())\n")
    async with running_server("visual-studio-code", tmp_path, {"cache_dir": str(tmp_path / "cache")}) as (client, _):
        await client.until(lambda: _logged(client, r"no model file in the workspace"), "the warm-up decision")
        status = await client.command("exportlens.status", (tmp_path / "app.py").as_uri())
        assert status["workers"] == "not-started"
        assert client._server is not None and children(client._server.pid) == set()

        # A model file written later still exports: its first export starts the worker.
        shutil.copy(EXAMPLES / "counter.py", tmp_path / "counter.py")
        doc = Doc(client, tmp_path / "counter.py")
        doc.open()
        assert [d.code for d in await client.diagnostics_for(doc.uri, 1)] == ["mutation/buffer"]
        status = await client.command("exportlens.status", doc.uri)
        assert status["workers"] in ("ready", "busy")
