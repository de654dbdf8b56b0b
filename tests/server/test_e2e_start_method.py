"""Through the real server: the editor's ``startMethod`` decides how the workers start
their jobs, the log says which (and why) as they start, and a file exports the same
way with either: the job process started ahead is a fresh interpreter, or a fork."""

from __future__ import annotations

import asyncio
import re
import shutil
import time
from pathlib import Path

import pytest

from tests.server.lsp_client import EXAMPLES, Doc, RecordingClient, children, running_server

pytestmark = pytest.mark.asyncio

STARTED_AS = {"spawn": "exportlens.core.isolation.spawning", "fork": "exportlens.core.isolation.zygote"}


async def _standby_cmdline(server_pid: int, timeout: float = 180.0) -> str:
    """The command line of the worker's next job process, started ahead once a result
    is out: a fresh interpreter's own, or, forked, the worker's."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for worker in children(server_pid):
            for job in children(worker):
                try:
                    cmdline = Path(f"/proc/{job}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                if cmdline:  # not a job that just ended (a zombie has none)
                    return cmdline
        await asyncio.sleep(0.2)
    raise AssertionError("no job process started ahead")


def _logged(client: RecordingClient, pattern: str) -> list[str]:
    return [m.message for m in client.log_messages if re.search(pattern, m.message)]


@pytest.mark.parametrize("method", ["spawn", pytest.param("fork", marks=pytest.mark.needs_speedup("standby job"))])  # seen by its job started ahead
async def test_the_editor_setting_chooses_and_the_log_says_so(tmp_path: Path, method: str) -> None:
    shutil.copy(EXAMPLES / "counter.py", tmp_path / "counter.py")
    options = {"cache_dir": str(tmp_path / "cache"), "startMethod": method}
    async with running_server("visual-studio-code", tmp_path, options) as (client, _):
        doc = Doc(client, tmp_path / "counter.py")
        doc.open()
        assert [d.code for d in await client.diagnostics_for(doc.uri, 1)] == ["mutation/buffer"]
        [line] = _logged(client, r"workers not-started -> starting")
        assert f"jobs start by {method} (" in line and "setting" in line
        status = await client.command("exportlens.status", doc.uri)
        assert status["settings"]["start_method"] == method
        assert client._server is not None
        assert STARTED_AS[method] in await _standby_cmdline(client._server.pid)
