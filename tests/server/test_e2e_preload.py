"""Through the real server: a library the model imports is preloaded by the worker,
and upgrading it on disk retires that worker and brings the open model's result up
to date, without a keystroke (the old result is not served from the cache)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.server.lsp_client import Doc, RecordingClient, running_server

pytestmark = [pytest.mark.asyncio, pytest.mark.needs_speedup("preloading")]

LIBRARY = "MUTATES = {mutates}\n"

MODEL = """
import torch
import verlib


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x):
        if verlib.MUTATES:
            self.count.add_(1)
        return x * 2


model = Counter()
example_args = (torch.randn(2),)
"""


def _install(site: Path, mutates: bool) -> Path:
    """verlib, written anew as an installer writes it."""
    init = site / "verlib" / "__init__.py"
    init.parent.mkdir(parents=True, exist_ok=True)
    staged = init.with_suffix(".new")
    staged.write_text(LIBRARY.format(mutates=mutates))
    os.replace(staged, init)
    return init


def _logged(client: RecordingClient, pattern: str) -> list[str]:
    return [m.message for m in client.log_messages if re.search(pattern, m.message)]


def _codes(client: RecordingClient, uri: str) -> list[str]:
    published = client.publishes(uri)
    return [str(d.code) for d in published[-1].diagnostics] if published else []


async def test_an_upgraded_library_retires_the_worker_and_refreshes_the_open_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site, workspace = tmp_path / "site", tmp_path / "ws"
    workspace.mkdir()
    init = _install(site, mutates=False)
    (workspace / "model.py").write_text(MODEL)
    monkeypatch.setenv("PYTHONPATH", str(site))  # installed, as far as the workers can tell
    monkeypatch.setenv("EXPORTLENS_STALE_CHECK_S", "0.2")
    async with running_server("visual-studio-code", workspace, {"cache_dir": str(tmp_path / "cache")}) as (client, _):
        doc = Doc(client, workspace / "model.py")
        doc.open()
        assert await client.diagnostics_for(doc.uri, 1) == []
        await client.until(lambda: _logged(client, r"worker preloaded libraries \(pid \d+: .*verlib"), "the worker preloaded verlib")

        _install(site, mutates=True)  # pip install -U verlib
        [retired] = await client.until(lambda: _logged(client, r"worker process retired"), "the worker retired")
        assert str(init) in retired
        await client.until(lambda: _codes(client, doc.uri) == ["mutation/buffer"], "the model exported with the new verlib")
        status = await client.command("exportlens.status", doc.uri)
        assert status["cached"] is False
        assert not _logged(client, r"worker process failed")
