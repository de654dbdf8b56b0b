"""The graph as a picture through the real server: ``exportlens.graph`` with ``page``.

The server returns the address of Model Explorer's page for the document's targets,
served on 127.0.0.1 under a token random per session; the page is opened in Debian's
chromium (``tests/chromium.py``), a node is found by its label with Model Explorer's
search and selected, and the client -- a real LSP client -- must receive
``window/showDocument`` for that node's file and line. An address without the token
serves nothing and makes nothing jump.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from tests.server.lsp_client import EXAMPLES, Doc, running_server

pytestmark = pytest.mark.asyncio

pytest.importorskip("model_explorer")


def _status(url: str, method: str = "GET") -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def _select_in_browser(url: str, label: str) -> dict[str, Any]:
    """Open the page, find the first node labelled ``label`` with the search and select
    it (Alt+click on the result, as a user does); what the page reported selecting."""
    from tests.chromium import Browser

    with Browser() as b:
        b.go(url)
        b.wait("the graph view", lambda: "op node count" in b.text())
        b.js(
            "(() => { const i = document.querySelector('input[placeholder*=\"Search\"]'); i.focus();"
            f" i.value = {label!r}; i.dispatchEvent(new Event('input', {{bubbles: true}})); }})()"
        )
        b.wait("search results", lambda: b.js(f"Array.from(document.querySelectorAll('div.label > span.node-label')).some(e => e.textContent.trim() === {label!r})"))
        b.js(
            f"Array.from(document.querySelectorAll('div.label > span.node-label')).find(e => e.textContent.trim() === {label!r})"
            ".dispatchEvent(new MouseEvent('click', {bubbles: true, altKey: true}))"
        )
        selected = b.wait("a selected node", lambda: b.js("window.__exportlensSelected"))
        b.pump()
        outside = [u for u in b.requests if not u.startswith("http://127.0.0.1:") and not u.startswith(("data:", "blob:"))]
        assert not outside, outside
        return dict(selected)


async def test_a_node_selected_in_the_page_shows_its_line(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    shutil.copy(EXAMPLES / "input_mutation.py", root / "model.py")
    async with running_server("neovim", root, {"cache": False}) as (client, _init):
        doc = Doc(client, root / "model.py")
        doc.open()
        await client.diagnostics_for(doc.uri, 1)
        page = await client.command("exportlens.graph", {"uri": doc.uri, "page": True})
        url = page["url"]
        assert page["title"] == "Normalizer: graph"
        assert url.startswith("http://127.0.0.1:") and url.endswith("/0/"), url
        token = url.split("/")[3]
        assert len(token) >= 20
        # The token is the key: another path, or a guessed one, gets nothing.
        origin = url.split(f"/{token}/")[0]
        assert _status(url) == 200
        # (its first character changed: a fixed "x" is the same token 1 time in 64)
        wrong = ("y" if token[0] == "x" else "x") + token[1:]
        assert _status(f"{origin}/0/") == 404 and _status(f"{origin}/{wrong}/0/") == 404
        assert _status(f"{origin}/{wrong}/0/exportlens/open?model=0&node=mul", "POST") == 404
        assert _status(url + "exportlens/graphs/0.json") == 200

        selected = await asyncio.to_thread(_select_in_browser, url, "aten.mul")
        assert selected["model"] == 0 and selected["node"] in {"mul", "mul_1", "mul_2"}
        shown = await client.until(lambda: list(client.shown_documents), "window/showDocument")
        assert len(shown) == 1
        want = doc.line_of({"mul": "x.mul_(2)", "mul_1": "self.scale.mul_(0.5)", "mul_2": "return x * self.scale"}[selected["node"]])
        assert shown[0].uri == doc.uri and shown[0].take_focus
        assert shown[0].selection is not None and shown[0].selection.start == types.Position(want, 0)

        # A node that leads nowhere (or a page that is not there) answers 404 and shows nothing.
        assert _status(url + "exportlens/open?model=0&node=nope", "POST") == 404
        assert _status(url.replace("/0/", "/7/") + "exportlens/open?model=0&node=mul", "POST") == 404
        assert len(client.shown_documents) == 1


def _select_in_frame(url: str, label: str) -> list[Any]:
    """The page inside an ``<iframe>`` of a page of another origin (another loopback
    port), as an editor's webview embeds it: select a node labelled ``label`` there;
    the messages the embedder received."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    from tests.chromium import Browser

    outer = (
        "<html><body style='margin:0'><script>window.got = [];"
        " addEventListener('message', e => window.got.push(e.data));</script>"
        f"<iframe src='{url}' style='width:1260px;height:780px;border:0'></iframe></body></html>"
    ).encode()

    class Embedder(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(outer)))
            self.end_headers()
            self.wfile.write(outer)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Embedder)
    Thread(target=httpd.serve_forever, daemon=True).start()
    with Browser() as b:
        b.go(f"http://127.0.0.1:{httpd.server_address[1]}/")
        # A context in the frame lasts as long as its document, and an isolated world as
        # long as the frame keeps it: one anew for each question.
        def in_frame(expression: str) -> Any:
            return b.js(expression, b.frame_context())

        b.wait("the graph view in the frame", lambda: b.frame_context() is not None and "op node count" in in_frame("(document.body && document.body.innerText) || ''"))
        in_frame(
            "(() => { const i = document.querySelector('input[placeholder*=\"Search\"]'); i.focus();"
            f" i.value = {label!r}; i.dispatchEvent(new Event('input', {{bubbles: true}})); }})()"
        )
        b.wait("search results", lambda: in_frame(f"Array.from(document.querySelectorAll('div.label > span.node-label')).some(e => e.textContent.trim() === {label!r})"))
        in_frame(
            f"Array.from(document.querySelectorAll('div.label > span.node-label')).find(e => e.textContent.trim() === {label!r})"
            ".dispatchEvent(new MouseEvent('click', {bubbles: true, altKey: true}))"
        )
        told = list(b.wait("the embedder told of the node", lambda: [m for m in b.js("window.got") if m.get("cmd") == "model-explorer-node-selected"]))
    httpd.shutdown()
    httpd.server_close()
    return told


async def test_the_page_in_a_frame_tells_its_embedder_and_the_server(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    shutil.copy(EXAMPLES / "input_mutation.py", root / "model.py")
    async with running_server("neovim", root, {"cache": False}) as (client, _init):
        doc = Doc(client, root / "model.py")
        doc.open()
        await client.diagnostics_for(doc.uri, 1)
        page = await client.command("exportlens.graph", {"uri": doc.uri, "page": True})
        told = await asyncio.to_thread(_select_in_frame, page["url"], "aten.mul")
        assert told[0]["nodeId"] in {"mul", "mul_1", "mul_2"}
        shown = await client.until(lambda: list(client.shown_documents), "window/showDocument")
        assert shown[0].uri == doc.uri


async def test_page_refuses_a_document_without_a_graph(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    shutil.copy(EXAMPLES / "data_dependent.py", root / "model.py")
    async with running_server("neovim", root, {"cache": False}) as (client, _init):
        doc = Doc(client, root / "model.py")
        doc.open()
        await client.diagnostics_for(doc.uri, 1)
        with pytest.raises(Exception, match="no graph"):
            await client.command("exportlens.graph", {"uri": doc.uri, "page": True})


NESTED = '''import torch
from torch import nn


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        h = self.proj(x)
        return torch.relu(h)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        y = self.inner(x)
        return y * 2


model = Net()
example_args = (torch.randn(4, 8),)
'''

# The page's UI state, as Model Explorer keeps it in the address (``data=``).
_UI_STATE = "JSON.parse(new URLSearchParams(location.search).get('data')).uiState.paneStates[0]"


def _cursor(client: Any, uri: str, line: int) -> None:
    client.protocol.notify("exportlens/cursor", {"uri": uri, "line": line})


async def test_the_cursor_selects_its_lines_nodes_and_a_new_result_keeps_the_view(tmp_path: Path) -> None:
    """The editor's cursor (``exportlens/cursor``) selects in the open page the nodes its
    line made -- without sending the editor anywhere -- and a saved edit redraws the page
    with the new graph, keeping the expanded layers and the selection."""
    from tests.chromium import Browser

    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    (root / "model.py").write_text(NESTED)
    async with running_server("neovim", root, {"cache": False}) as (client, _init):
        doc = Doc(client, root / "model.py")
        doc.open()
        await client.diagnostics_for(doc.uri, 1)
        page = await client.command("exportlens.graph", {"uri": doc.uri, "page": True})
        b = await asyncio.to_thread(Browser)
        try:
            await asyncio.to_thread(b.go, page["url"])
            await asyncio.to_thread(b.wait, "the graph view", lambda: "op node count" in b.text())

            # The line inside the layer: its node is selected, and its layer opened to show it.
            _cursor(client, doc.uri, doc.line_of("h = self.proj(x)"))
            chosen = await asyncio.to_thread(b.wait, "the cursor's node selected", lambda: b.js("window.__exportlensCursor.selected"))
            assert chosen == "linear", chosen
            assert b.js("window.__exportlensCursor.nodes") == ["linear"]
            state = await asyncio.to_thread(b.wait, "the selection in the UI state", lambda: (s := b.js(_UI_STATE))["selectedNodeId"] == "linear" and s)
            expanded = state["deepestExpandedGroupNodeIds"]
            assert expanded, state  # the layer holding it is open

            # The call of the layer made every node of it: the first is selected.
            _cursor(client, doc.uri, doc.line_of("y = self.inner(x)"))
            await asyncio.to_thread(b.wait, "the layer call's first node", lambda: b.js("window.__exportlensCursor.selected") == "linear" and b.js("window.__exportlensCursor.nodes").__len__() >= 2)
            assert set(b.js("window.__exportlensCursor.nodes")) == {"linear", "relu"}
            _cursor(client, doc.uri, doc.line_of("return y * 2"))
            await asyncio.to_thread(b.wait, "the multiplication", lambda: b.js("window.__exportlensCursor.selected") == "mul")
            # A line of the editor's own choosing moves nothing in the editor.
            await asyncio.sleep(1.0)
            assert client.shown_documents == []

            # Back inside the layer, then a new result: the page reloads with the new graph.
            _cursor(client, doc.uri, doc.line_of("h = self.proj(x)"))
            await asyncio.to_thread(b.wait, "linear again", lambda: b.js(_UI_STATE)["selectedNodeId"] == "linear")
            before = b.js(_UI_STATE)
            b.js("window.__exportlensOld = true")
            version = doc.replace("return y * 2", "return (y * 2).sin()")
            doc.save()
            await client.diagnostics_for(doc.uri, version)
            await asyncio.to_thread(b.wait, "the page reloaded", lambda: b.js("window.__exportlensOld !== true && document.querySelector('canvas') !== null"))
            graph = await asyncio.to_thread(b.js, "fetch('exportlens/graphs/0.json').then(r => r.json())")
            assert "aten.sin" in {n["label"] for n in graph["graphs"][0]["nodes"]}
            after = await asyncio.to_thread(b.wait, "the restored view", lambda: (s := b.js(_UI_STATE))["selectedNodeId"] == "linear" and s)
            assert after["deepestExpandedGroupNodeIds"] == before["deepestExpandedGroupNodeIds"], (before, after)
            # Restoring the selection is not a person's click: the editor stays where it is.
            await asyncio.sleep(1.0)
            assert client.shown_documents == []
        finally:
            await asyncio.to_thread(b.close)


async def test_a_cursor_notification_with_bad_params_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    (root / "model.py").write_text(NESTED)
    async with running_server("neovim", root, {"cache": False}) as (client, _init):
        doc = Doc(client, root / "model.py")
        doc.open()
        await client.diagnostics_for(doc.uri, 1)
        page = await client.command("exportlens.graph", {"uri": doc.uri, "page": True})
        for bad in ({"uri": doc.uri}, {"uri": doc.uri, "line": -1}, {"uri": 3, "line": 1}, {"line": True}):
            client.protocol.notify("exportlens/cursor", bad)
        _cursor(client, doc.uri, 0)  # a line that made no node
        # The server is alive and the page's events name no selection.
        assert (await client.command("exportlens.graph", {"uri": doc.uri, "page": True}))["url"] != page["url"]
        with urllib.request.urlopen(page["url"] + "exportlens/events?after=-1", timeout=30) as r:
            events = json.loads(r.read())
        assert events == {"seq": 0, "select": None, "version": 0}, events
        _cursor(client, doc.uri, doc.line_of("return y * 2"))
        await asyncio.sleep(0.5)
        with urllib.request.urlopen(page["url"] + "exportlens/events?after=0", timeout=30) as r:
            events = json.loads(r.read())
        # the multiplication, and the output whose value that line returns
        assert events["select"] == {"model": 0, "nodes": ["mul", "output"]}, events
