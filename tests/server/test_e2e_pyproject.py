"""An open pyproject.toml shows what is wrong with its ``[tool.exportlens]`` (issue
22), through the real server: a TOML error at its position, following the typing; a
``targets`` entry naming a function the file does not have, at the entry (found by
exporting the file it names)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from tests.server.lsp_client import Doc, running_server
from tests.workspaces import MYMODELS_BLOCKS, MYMODELS_PYPROJECT, mymodels_workspace

pytestmark = pytest.mark.asyncio

CLEAN_BLOCKS = MYMODELS_BLOCKS.replace("if x.sum() > 0:", "if x.shape[0] > 0:")


class Toml(Doc):
    def open(self) -> int:
        self.version = 1
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=self.uri, language_id="toml", version=1, text=self.text)))
        return 1


async def test_an_unparsable_pyproject_shows_its_error_and_typing_the_fix_clears_it(tmp_path: Path) -> None:
    mymodels_workspace(tmp_path, blocks=CLEAN_BLOCKS, pyproject=MYMODELS_PYPROJECT.replace("[tool.exportlens]", "[tool.exportlens"))
    async with running_server("neovim", tmp_path) as (client, _):
        toml = Toml(client, tmp_path / "pyproject.toml")
        toml.open()
        [d] = await client.diagnostics_for(toml.uri, 1)
        line = toml.line_of("[tool.exportlens")
        assert (d.code, d.severity, d.range.start.line, d.range.start.character) == ("target-error", types.DiagnosticSeverity.Error, line, len("[tool.exportlens"))
        assert "Expected ']'" in d.message
        fixed = toml.replace("[tool.exportlens\n", "[tool.exportlens]\n")  # typed, not saved
        assert await client.diagnostics_for(toml.uri, fixed) == []


async def test_a_misspelt_target_is_shown_at_its_entry(tmp_path: Path) -> None:
    mymodels_workspace(tmp_path, blocks=CLEAN_BLOCKS, pyproject=MYMODELS_PYPROJECT.replace(":make_net", ":make_nett"))
    async with running_server("neovim", tmp_path) as (client, _):
        toml = Toml(client, tmp_path / "pyproject.toml")
        toml.open()
        # The first publish may come before the named file's export: wait for the entry's.
        found = await client.until(
            lambda: next((list(p.diagnostics) for p in reversed(client.publishes(toml.uri)) if p.diagnostics), None),
            "the misspelt entry's diagnostic",
        )
        [d] = found
        line = toml.line_of('"mymodels/net.py:make_nett"')
        assert (d.code, d.range.start.line) == ("target-error", line)
        assert d.range.start.character == toml.text.split("\n")[line].index('"')
        assert "has no function `make_nett` (did you mean `make_net`?)" in d.message

        # The fix, saved; then net.py opened: its export (with the fixed pyproject)
        # shows the pyproject again, clean.
        toml.replace(":make_nett", ":make_net")
        toml.save()
        net = Doc(client, tmp_path / "mymodels" / "net.py")
        net.open()
        assert await client.diagnostics_for(net.uri, 1) == []
        # In the order the client received them (the pyproject's may arrive in the
        # same read as net.py's, before this test resumes): those after net.py's.
        after = max(i for i, p in enumerate(client.published) if p.uri == net.uri)
        shown = await client.until(lambda: [p for p in client.published[after:] if p.uri == toml.uri], "the pyproject shown after net.py's export")
        assert list(shown[-1].diagnostics) == []
