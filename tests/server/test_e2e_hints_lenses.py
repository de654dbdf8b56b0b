"""Inlay hints, code lenses and the graph view through the real server, on the layout
real projects use: the model classes in their own module (``pkg/model.py``), the
target declared in another file with a named ``Dim``. Everything shows in the module,
where the code is."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from tests.server.lsp_client import Doc, RecordingClient, running_server

pytestmark = pytest.mark.asyncio

MODEL = '''\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 8)

    def forward(self, x):
        h = self.lin(x)
        return h.relu()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        y = self.block(  # the block's output
            x
        )
        z = y * 2 + 1
        return z.sum(-1)
'''

TARGETS = """\
import torch
from torch.export import Dim

from pkg.model import Net

batch = Dim("batch", min=2, max=64)
model = Net()
example_args = (torch.randn(4, 16),)
dynamic_shapes = {"x": {0: batch}}
"""


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "model.py").write_text(MODEL)
    (root / "targets.py").write_text(TARGETS)
    return root


def whole(doc: Doc) -> types.Range:
    return types.Range(types.Position(0, 0), types.Position(len(doc.text.split("\n")), 0))


async def hints(client: RecordingClient, doc: Doc) -> dict[int, types.InlayHint]:
    found = await client.text_document_inlay_hint_async(types.InlayHintParams(types.TextDocumentIdentifier(doc.uri), whole(doc)))
    return {h.position.line: h for h in found or []}


async def test_hints_lenses_and_graph_in_the_model_module(tmp_path: Path) -> None:
    root = project(tmp_path)
    asked: list[str] = []
    async with running_server("neovim", root, {"cache": False}, asked=asked) as (client, init):
        assert init.capabilities.inlay_hint_provider and init.capabilities.code_lens_provider
        declaring = Doc(client, root / "targets.py")
        declaring.open()
        assert await client.diagnostics_for(declaring.uri, 1) == []
        module = Doc(client, root / "pkg" / "model.py")
        module.open()
        await client.diagnostics_for(module.uri, 1)

        # Hints after each line of the module's forwards, at the end of the statement's code.
        lines = module.text.split("\n")
        by_line = await hints(client, module)
        expected = {
            module.line_of("h = self.lin(x)"): "float32[batch, 8]",
            module.line_of("return h.relu()"): "float32[batch, 8]",
            module.line_of("y = self.block(") + 2: "float32[batch, 8]",  # after the call's ")", its last value
            module.line_of("z = y * 2 + 1"): "float32[batch, 8]",
            module.line_of("return z.sum(-1)"): "float32[batch]",
        }
        assert {line: h.label for line, h in by_line.items()} == expected
        for line, hint in by_line.items():
            assert hint.position.character == len(lines[line].rstrip()), lines[line]
            assert hint.kind == types.InlayHintKind.Type and hint.padding_left
        tooltip = by_line[module.line_of("return z.sum(-1)")].tooltip
        assert isinstance(tooltip, types.MarkupContent) and "`sum_1`" in tooltip.value and "`batch` is torch's `s" in tooltip.value

        # A lens on the exported class's line: its status re-exports, "Show graph" opens the graph.
        lenses = await client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(module.uri)))
        assert lenses and {lens.range.start.line for lens in lenses} == {module.line_of("class Net(nn.Module):")}
        status, graph = [lens.command for lens in lenses]
        assert status is not None and graph is not None
        assert status.title.startswith("✓ Net exported in ") and status.title.endswith(" · 1 input → 1 output · 2 parameters"), status.title
        assert status.command == "exportlens.reexport" and list(status.arguments or []) == [module.uri]
        assert graph.title == "Show graph" and graph.command == "exportlens.graph"

        view = await client.command(graph.command, *(graph.arguments or []))
        rows = view["text"].split("\n")
        assert rows[0] == "# Net: 9 nodes (batch is torch's " + rows[0].rsplit(" ", 1)[-1]
        [linear] = [link for link in view["links"] if rows[link["line"]].startswith("linear ")]
        assert linear["uri"] == module.uri and linear["range"]["start"]["line"] == module.line_of("h = self.lin(x)")
        assert rows[linear["line"]][linear["start"] : linear["end"]] == f"pkg/model.py:{module.line_of('h = self.lin(x)') + 1}"
        assert "aten.linear.default" in rows[linear["line"]] and "float32[batch, 8]" in rows[linear["line"]]
        [weight] = [link for link in view["links"] if rows[link["line"]].startswith("p_block_lin_weight ")]
        assert weight["range"]["start"]["line"] == module.line_of("self.lin = nn.Linear(16, 8)")

        # What one line became: the nodes of `z = y * 2 + 1`, nothing else.
        nodes = await client.command("exportlens.graph", {"uri": module.uri, "line": module.line_of("z = y * 2 + 1")})
        ops = [row.split()[1] for row in nodes["text"].split("\n")[1:] if row]
        assert ops == ["aten.mul.Tensor", "aten.add.Tensor"], nodes["text"]
        # The call of a submodule produced the submodule's nodes.
        nodes = await client.command("exportlens.graph", {"uri": module.uri, "line": module.line_of("y = self.block(")})
        assert [row.split()[0] for row in nodes["text"].split("\n")[1:] if row] == ["linear", "relu"]

        # The client was asked to show the new hints and lenses once the result was in.
        assert types.WORKSPACE_INLAY_HINT_REFRESH in asked, asked
        # Running the status lens exports the declaring file again (not from the cache) and says how it went.
        again = await client.command(status.command, *(status.arguments or []))
        assert again["state"] == "ok" and again["targets"][0]["name"] == "Net"

        # The declaring file: a lens on the target, no hints (no line of it computes).
        assert await hints(client, declaring) == {}
        lenses = await client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(declaring.uri)))
        assert lenses and lenses[0].range.start.line == declaring.line_of("model = Net()")

        # A changed line loses its hint (its columns may not hold); the others keep theirs.
        module.replace("z = y * 2 + 1", "z = y * 2 + 1  # edited")
        assert module.line_of("z = y * 2 + 1") not in await hints(client, module)
        # Nor does the graph say what a line became once the buffer moved the lines:
        # the result's nodes at that number are another line's.
        module.replace("        y = self.block(", "        pre = x\n        y = self.block(")
        nodes = await client.command("exportlens.graph", {"uri": module.uri, "line": module.line_of("z = y * 2 + 1")})  # the old `return` line
        assert nodes["links"] == [] and "changed since the last export" in nodes["text"], nodes["text"]

        # The setting turns hints off.
        refreshes = asked.count(types.WORKSPACE_INLAY_HINT_REFRESH)
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"exportlens": {"cache": False, "inlayHints": False}}))
        await client.until(lambda: asked.count(types.WORKSPACE_INLAY_HINT_REFRESH) > refreshes, "a hint refresh after the setting changed")
        assert await hints(client, module) == {}


async def test_lens_refresh_and_graph_command_refuses_bad_arguments(tmp_path: Path) -> None:
    root = project(tmp_path)
    asked: list[str] = []
    async with running_server("visual-studio-code", root, {"cache": False}, asked=asked) as (client, _):
        declaring = Doc(client, root / "targets.py")
        declaring.open()
        await client.diagnostics_for(declaring.uri, 1)
        # This client can be asked to refresh its lenses (not its hints: it has none).
        await client.until(lambda: types.WORKSPACE_CODE_LENS_REFRESH in asked, "a lens refresh")
        assert types.WORKSPACE_INLAY_HINT_REFRESH not in asked
        for bad in ({"uri": declaring.uri, "target": "Nope"}, {"uri": declaring.uri, "line": -1}, {"uri": 3}):
            with pytest.raises(Exception, match="target|line|URI"):
                await client.command("exportlens.graph", bad)
        # The server still answers.
        assert "# Net" in (await client.command("exportlens.graph", declaring.uri))["text"]
