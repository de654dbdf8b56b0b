"""Typing in a local module, through the real server (issue 22): ``mymodels/blocks.py``
holds the block whose data-dependent branch fails ``make_net`` (declared for
``mymodels/net.py`` in pyproject.toml). Its typed, unsaved text is what the export
imports, so its diagnostic moves with the typing -- with ``net.py`` open or not --
and the result made from that text is never served for the module on disk. A syntax
error or a failed import in the module is shown in the module's view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lsprotocol import types

from tests.conftest import run_cli
from tests.server.lsp_client import Doc, RecordingClient, running_server
from tests.workspaces import MYMODELS_BLOCKS, mymodels_workspace

pytestmark = pytest.mark.asyncio

BRANCH = "        if x.sum() > 0:"


async def _diagnostic_lines(client: RecordingClient, doc: Doc, version: int) -> list[tuple[str, int]]:
    return [(str(d.code), d.range.start.line) for d in await client.diagnostics_for(doc.uri, version)]


@pytest.mark.parametrize("declaring_open", [True, False], ids=["net.py-open", "net.py-closed"])
async def test_typing_in_a_module_moves_its_diagnostic_before_it_is_saved(tmp_path: Path, declaring_open: bool) -> None:
    project = tmp_path / "project"
    project.mkdir()
    mymodels_workspace(project)
    cache = tmp_path / "cache"
    async with running_server("neovim", project, {"cache_dir": str(cache)}) as (client, _):
        if declaring_open:
            net = Doc(client, project / "mymodels" / "net.py")
            net.open()
            await client.diagnostics_for(net.uri, 1)
        blocks = Doc(client, project / "mymodels" / "blocks.py")
        blocks.open()
        line = blocks.line_of(BRANCH)
        assert await _diagnostic_lines(client, blocks, 1) == [("data-dependent", line)]

        typed = blocks.replace(BRANCH, "        y = y * 2\n        y = y + 1\n" + BRANCH)  # not saved
        assert await _diagnostic_lines(client, blocks, typed) == [("data-dependent", line + 2)]
        assert blocks.path.read_text() == MYMODELS_BLOCKS  # the disk never saw the typing

        # A result made from the unsaved text is not the module on disk's: `check`, on
        # the same cache, reports the saved line.
        proc = run_cli("check", "--format", "json", "--cache-dir", str(cache), cwd=project)
        [entry] = json.loads(proc.stdout)["files"]
        assert [(d["file"], d["line"]) for d in entry["diagnostics"]] == [("mymodels/blocks.py", line + 1)]

        fixed = blocks.replace(BRANCH, "        if x.shape[0] > 0:")  # typing the fix clears it, still unsaved
        assert await _diagnostic_lines(client, blocks, fixed) == []
        # The unsaved text is not a file that changed during the export: nothing is
        # exported again for it (it was, without end: the disk's bytes never match).
        assert not [m.message for m in client.log_messages if "changed during its export" in m.message]


@pytest.mark.parametrize("case", ["syntax", "import"])
async def test_a_syntax_or_import_error_in_a_module_is_shown_in_the_module(tmp_path: Path, case: str) -> None:
    line, text, code = {"syntax": (15, "        y = = 2", "syntax-error"), "import": (5, "import einops_is_not_installed", "import-error")}[case]
    lines = MYMODELS_BLOCKS.splitlines()
    lines[line - 1] = text
    mymodels_workspace(tmp_path, blocks="\n".join(lines) + "\n")
    async with running_server("neovim", tmp_path) as (client, _):
        blocks = Doc(client, tmp_path / "mymodels" / "blocks.py")
        blocks.open()
        [d] = await client.diagnostics_for(blocks.uri, 1)
        assert (d.code, d.range.start.line, d.severity) == (code, line - 1, types.DiagnosticSeverity.Error)
        assert d.related_information and d.related_information[0].location.uri.endswith("/mymodels/net.py")
        net = Doc(client, tmp_path / "mymodels" / "net.py")
        net.open()
        [shown] = await client.diagnostics_for(net.uri, 1)
        assert shown.range.start.line == net.line_of("from mymodels.blocks import Block") and shown.message.startswith(f"blocks.py:{line}: ")
