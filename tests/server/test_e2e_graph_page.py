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
        assert _status(f"{origin}/0/") == 404 and _status(f"{origin}/x{token[1:]}/0/") == 404
        assert _status(f"{origin}/x{token[1:]}/0/exportlens/open?model=0&node=mul", "POST") == 404
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
