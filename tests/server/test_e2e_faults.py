"""Models that crash, hang, print or eat memory: diagnostics, and the server lives on."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.server.lsp_client import EXAMPLES, Doc, codes, running_server

pytestmark = pytest.mark.asyncio

CHATTY = '''"""Prints a lot while it loads and runs."""

import sys

import torch

for i in range(20000):
    print("model says", i)
sys.stdout.flush()
sys.stderr.write("and complains on stderr\\n")


class Chatty(torch.nn.Module):
    def forward(self, x):
        print("forward says hello")
        return x - 1


model = Chatty()
example_args = (torch.randn(3),)
'''


async def test_faulty_models_become_diagnostics_and_the_server_keeps_serving(tmp_path: Path) -> None:
    # Which limit stops a job must not depend on the machine's speed. Only hang.py,
    # which can only ever time out, gets a short timeout (a folder and pyproject.toml
    # of its own); the others get one no loaded machine comes near, so the memory hog
    # can only be stopped by its memory cap.
    for name in ("segfault.py", "memory_hog.py"):
        shutil.copy(EXAMPLES / "faults" / name, tmp_path / name)
    (tmp_path / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 600\nmemory_mb = 2048\n")
    (tmp_path / "hang").mkdir()
    shutil.copy(EXAMPLES / "faults" / "hang.py", tmp_path / "hang" / "hang.py")
    (tmp_path / "hang" / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 3\n")
    shutil.copy(EXAMPLES / "clean.py", tmp_path / "clean.py")
    (tmp_path / "chatty.py").write_text(CHATTY)
    options = {"cache": False}  # no timeout here: it would override both pyproject files
    async with running_server("visual-studio-code", tmp_path, options) as (client, _):
        files = {"segfault.py": "segfault.py", "hang.py": "hang/hang.py", "memory_hog.py": "memory_hog.py", "chatty.py": "chatty.py"}
        docs = {name: Doc(client, tmp_path / relative) for name, relative in files.items()}
        for doc in docs.values():
            doc.open()
        crash = await client.diagnostics_for(docs["segfault.py"].uri, 1)
        assert codes(crash) == [("worker-crash", docs["segfault.py"].line_of("ctypes.string_at(0)"))]
        hang = await client.diagnostics_for(docs["hang.py"].uri, 1)
        assert codes(hang) == [("timeout", docs["hang.py"].line_of("while True"))]
        hog = await client.diagnostics_for(docs["memory_hog.py"].uri, 1)
        assert codes(hog) == [("out-of-memory", docs["memory_hog.py"].line_of("hoard.append"))]
        assert await client.diagnostics_for(docs["chatty.py"].uri, 1) == []

        # Still alive, still answering, and another file exports cleanly.
        clean = Doc(client, tmp_path / "clean.py")
        clean.open()
        assert await client.diagnostics_for(clean.uri, 1) == []
        status = await client.command("exportlens.status", clean.uri)
        assert status["state"] == "ok" and status["workers"] in ("ready", "busy")
        assert client._server is not None and client._server.returncode is None
        assert client.messages == []  # no message boxes for a model's own faults
