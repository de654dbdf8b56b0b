"""Hover in the declaring file about code in a local module, through the real server
(issue 22, point 5): the target's hover in ``mymodels/net.py`` names the block's
parameter line with its file (``blocks.py:10``, as the CLI says
``mymodels/blocks.py:10``), never as ``line 10`` -- net.py's line 10 is another
statement, where no hover is anchored either."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from tests.server.lsp_client import Doc, running_server
from tests.workspaces import MYMODELS_BLOCKS, mymodels_workspace

pytestmark = pytest.mark.asyncio

EXPORTS = MYMODELS_BLOCKS.replace("if x.sum() > 0:", "if x.shape[0] > 0:")  # the block exports


async def test_the_targets_hover_names_the_modules_lines_with_their_file(tmp_path: Path) -> None:
    mymodels_workspace(tmp_path, blocks=EXPORTS)
    async with running_server("neovim", tmp_path, {"cache_dir": str(tmp_path / ".cache")}) as (client, _):
        net = Doc(client, tmp_path / "mymodels" / "net.py")
        net.open()
        assert await client.diagnostics_for(net.uri, 1) == []

        def at(line: int, column: int) -> types.HoverParams:
            return types.HoverParams(types.TextDocumentIdentifier(net.uri), net.position(line, column))

        declared = net.line_of("def make_net():")
        found = await client.text_document_hover_async(at(declared, 4))
        assert found is not None and isinstance(found.contents, types.MarkupContent)
        weight = next(row for row in found.contents.value.splitlines() if row.startswith("p_block_fc_weight"))
        made = EXPORTS.splitlines().index("        self.fc = nn.Linear(8, 8)") + 1
        assert weight.endswith(f"blocks.py:{made}"), weight

        assert net.text.split("\n")[made - 1].strip() == "def __init__(self) -> None:"  # the same number here
        assert await client.text_document_hover_async(at(made - 1, 8)) is None
