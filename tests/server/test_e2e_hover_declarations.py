"""Hover on declarations through the real server (issue 12, hover gaps), on a model
whose classes live in their own module: the module's submodule ``class`` lines list
their parameters and buffers under every instance path, the root class shows the
target; the declaring file's ``model = Net()`` line shows the target and its
``Dim(...)`` the range torch recorded, with the user's Dim names in shapes."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from tests.server.lsp_client import Doc, RecordingClient, running_server
from tests.workspaces import split_workspace

pytestmark = pytest.mark.asyncio


async def _hover(client: RecordingClient, doc: Doc, text: str, word: str) -> str:
    line = doc.line_of(text)
    column = doc.text.split("\n")[line].index(word)
    found = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(doc.uri), doc.position(line, column)))
    assert found is not None and isinstance(found.contents, types.MarkupContent), f"no hover on {text!r}"
    return found.contents.value


async def test_declarations_hover_where_their_code_is(tmp_path: Path) -> None:
    model_path = split_workspace(tmp_path)
    async with running_server("neovim", tmp_path, {"cache_dir": str(tmp_path / ".cache")}) as (client, _):
        layers = Doc(client, tmp_path / "pkg" / "layers.py")
        layers.open()
        assert await client.diagnostics_for(layers.uri, 1) == []

        block = await _hover(client, layers, "class Block(nn.Module):", "Block")
        # Block defines no parameter itself: its instances come from torch's module records.
        assert block.startswith("**class Block** · submodule of `Net` at `first`, `second`")
        rows = block.split("\n")
        [weight] = [r for r in rows if r.startswith("p_first_attn_q_weight: PARAMETER target='first.attn.q.weight'")]
        assert weight.endswith("float32[8, 8] cpu")
        assert any(r.startswith("b_second_attn_scale: BUFFER target='second.attn.scale' persistent=False") for r in rows)
        assert "target='second.attn.q.bias'" in block
        attn = await _hover(client, layers, "class Attn(nn.Module):", "Attn")
        assert attn.startswith("**class Attn** · submodule of `Net` at `first.attn`, `second.attn`")
        net = await _hover(client, layers, "class Net(nn.Module):", "Net")
        assert net.startswith("**Net** · export ok") and "float32[batch, 8] cpu" in net and "batch ∈ [2, 64]" in net

        model = Doc(client, model_path)
        model.open()
        await client.diagnostics_for(model.uri, 1)
        line = await _hover(client, model, "model = Net()", "model")
        assert line.startswith("**Net** · export ok") and "# inputs" in line and "x: USER_INPUT" in line
        assert "float32[batch, 8] cpu" in line
        symbol = line.split("batch is torch's ", 1)[1].split()[0]
        assert symbol.startswith("s")  # torch's own symbol, kept at hand
        dim = await _hover(client, model, 'Dim("batch"', "Dim")
        assert dim.startswith("**Dim `batch`** · `Net`") and "batch ∈ [2, 64]" in dim and f"batch is torch's {symbol}" in dim
        assert "x: USER_INPUT  float32[batch, 8] cpu" in dim
