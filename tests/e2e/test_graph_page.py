"""``exportlens graph``: the JSON, and the page drawn for real by headless chromium.

The page is written by the real CLI (``graph FILE --format html -o DIR``), served by a
plain static web server (Python's ``http.server``) on loopback, and opened in Debian's
chromium over the DevTools protocol (``tests/chromium.py``). It must show the graph
view (not Model Explorer's model-selection page) with the model's node count, draw a
picture that is not blank, ask nothing of any address but the loopback server, find
a node by its label with Model Explorer's search, show that node's source line and
diagnostic once selected, and carry the overlay on the nodes with a diagnostic.
Screenshots go to ``tests/e2e/artifacts/graph/`` (``EXPORTLENS_UPDATE_DOCS_IMAGES=1``
also copies the picture to ``docs/images/graph.png`` for the README).
"""

from __future__ import annotations

import functools
import io
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT, run_cli

pytest.importorskip("model_explorer")

ARTIFACTS = Path(__file__).resolve().parent / "artifacts" / "graph"
MODEL = EXAMPLES / "input_mutation.py"


def _graph_json(*extra: str) -> dict:
    proc = run_cli("graph", str(MODEL), *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_json_is_one_graph_collection_with_the_overlay() -> None:
    doc = _graph_json()
    assert doc["label"] == "input_mutation.py"
    (graph,) = doc["graphs"]
    assert graph["id"] == "Normalizer"
    nodes = {n["id"]: n for n in graph["nodes"]}
    lines = MODEL.read_text().splitlines()
    mul_line = next(i for i, t in enumerate(lines, 1) if "x.mul_(2)" in t)
    attrs = {a["key"]: a["value"] for a in nodes["mul"]["attrs"]}
    assert attrs["source"] == f"input_mutation.py:{mul_line}"
    assert attrs["mutates"] == "input x" and attrs["diagnostics"].startswith("mutation/user-input:")
    assert {a["key"]: a["value"] for a in nodes["x"]["attrs"]}["input"] == "USER_INPUT"
    overlay = doc["exportlens"]["nodeData"]["Normalizer"]["results"]
    assert overlay["mul"]["value"] == "warning" and overlay["x"]["value"] == "mutation"
    assert [item[0] for item in doc["exportlens"]["legend"]][:2] == ["error", "warning"]


def test_unknown_target_and_missing_file_are_usage_errors(tmp_path: Path) -> None:
    proc = run_cli("graph", str(MODEL), "--target", "Nope")
    assert proc.returncode == 2 and "no target 'Nope'" in proc.stderr and "Normalizer" in proc.stderr
    proc = run_cli("graph", str(tmp_path / "missing.py"))
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_a_file_whose_export_fails_has_no_graph() -> None:
    proc = run_cli("graph", str(EXAMPLES / "data_dependent.py"))
    assert proc.returncode == 1
    assert "no graph (the export failed)" in proc.stderr and "data-dependent" in proc.stderr


def test_open_serves_the_page_on_loopback_until_interrupted(tmp_path: Path) -> None:
    """``--open``: the address on stdout, the browser started on it ($BROWSER, here a
    script that writes what it was given), the page served under a token; Ctrl-C ends it."""
    import signal
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f"#!/bin/sh\necho \"$1\" > {opened}\n")
    browser.chmod(0o755)
    env = dict(os.environ, PYTHONWARNINGS="ignore", BROWSER=str(browser))
    proc = subprocess.Popen([sys.executable, "-m", "exportlens", "graph", str(MODEL), "--open"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/0/"), (url, proc.stderr.read() if proc.poll() is not None else "")
        with urllib.request.urlopen(url, timeout=30) as r:
            assert "window.__exportlens" in r.read().decode()
        with urllib.request.urlopen(url + "exportlens/graphs/0.json", timeout=30) as r:
            assert json.loads(r.read())["graphs"][0]["nodes"]
        token = url.split("/")[3]
        with pytest.raises(urllib.error.HTTPError) as refused:
            # Another token of the same length: its first character changed (a fixed "x"
            # was the same token whenever the random one began with "x", 1 in 64).
            wrong = ("y" if token[0] == "x" else "x") + token[1:]
            urllib.request.urlopen(url.replace(token, wrong), timeout=30)
        assert refused.value.code == 404
        deadline = time.monotonic() + 120  # the browser script's start, on a loaded machine
        while time.monotonic() < deadline and not (opened.exists() and opened.read_text().strip()):
            threading.Event().wait(0.1)
        assert opened.read_text().strip() == url
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("page")
    proc = run_cli("graph", str(MODEL), "--format", "html", "-o", str(folder))
    assert proc.returncode == 0, proc.stderr
    index = (folder / "index.html").read_text()
    assert "fonts.gstatic.com" not in index and "@font-face{font-family:'Google Sans Text'" not in index

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def _not_blank(png: bytes) -> float:
    """The share of the picture's pixels that are not the background's colour."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    width, height = image.size
    graph_area = image.crop((0, 100, int(width * 0.6), height - 120))  # the canvas, left of the side panel
    colours = graph_area.getcolors(maxcolors=1 << 20) or []
    background = max(colours)[1]
    return 1 - sum(n for n, c in colours if c == background) / (graph_area.width * graph_area.height)


def test_the_page_draws_the_graph_offline(served: str) -> None:
    from tests.chromium import Browser

    nodes = _graph_json()["graphs"][0]["nodes"]
    if ARTIFACTS.exists():
        shutil.rmtree(ARTIFACTS)
    with Browser() as b:
        b.go(served)
        # The graph view, with the model's node count: not the model-selection page.
        text = b.wait("the graph view", lambda: (t := b.text() or "") and "op node count" in t and t)
        assert f"{len(nodes)} nodes" in text, text[:400]
        assert "Normalizer" in text and "Select a model" not in text
        # The overlay: the node-data run with the nodes that carry a diagnostic.
        rows = b.wait(
            "the overlay",
            lambda: [r for r in b.js("Array.from(document.querySelectorAll('tr')).map(r => r.innerText.replace(/\\s+/g, ' ').trim())") if r.endswith(("warning", "mutation"))],
        )
        assert any(r.endswith("aten.mul warning") for r in rows), rows
        assert any(r.endswith("x mutation") for r in rows), rows
        assert "exportlens" in b.js("document.getElementById('exportlens-legend').innerText")
        # The picture itself (the layout runs in a worker: wait until it is drawn).
        shot = b.wait("a picture", lambda: (png := b.screenshot(str(ARTIFACTS / "page.png"))) and _not_blank(png) > 0.01 and png)
        assert _not_blank(shot) > 0.01
        # A node found by its label with Model Explorer's search, then selected
        # (Alt+click on the result): the side panel shows its line and its diagnostic.
        b.js(
            "(() => { const i = document.querySelector('input[placeholder*=\"Search\"]'); i.focus();"
            " i.value = 'aten.mul'; i.dispatchEvent(new Event('input', {bubbles: true})); })()"
        )
        labelled = [n["id"] for n in nodes if n["label"] == "aten.mul"]
        found = b.wait(
            "search results",
            lambda: b.js("Array.from(document.querySelectorAll('div.label > span.node-label')).filter(e => e.textContent.trim() === 'aten.mul').length"),
        )
        assert found == len(labelled) == 3
        b.js(
            "Array.from(document.querySelectorAll('span.node-label')).find(e => e.textContent.trim() === 'aten.mul')"
            ".dispatchEvent(new MouseEvent('click', {bubbles: true, altKey: true}))"
        )
        selected = b.wait("a selected node", lambda: b.js("window.__exportlensSelected"))
        assert selected["node"] in labelled
        info = b.wait("the node's info", lambda: (t := b.text()) and "input_mutation.py:" in t and t)
        want = {a["key"]: a["value"] for a in next(n for n in nodes if n["id"] == selected["node"])["attrs"]}
        assert want["source"] in info
        b.screenshot(str(ARTIFACTS / "selected.png"))
        b.pump()
        # Nothing beyond the loopback server: no font CDN, no version check, no analytics.
        outside = [u for u in b.requests if not u.startswith(served) and not u.startswith(("data:", "blob:"))]
        assert not outside, outside
        assert any(u.startswith(served + "exportlens/graphs/0.json") for u in b.requests), b.requests
    if os.environ.get("EXPORTLENS_UPDATE_DOCS_IMAGES") == "1":
        shutil.copy(ARTIFACTS / "selected.png", ROOT / "docs" / "images" / "graph.png")


STACK = '''
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x, scale):
        return torch.relu(self.lin(x)) * scale


class Stack(nn.Module):
    """A layer whose children are a long stack of blocks that all take one value
    made before them: what made expanding a 70B decoder's layer take minutes."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(30))

    def forward(self, x):
        scale = x.mean()
        for block in self.blocks:
            x = block(x, scale)
        return x


model = Stack()
example_args = (torch.randn(2, 8),)
'''


def _expand_by_selecting(b, label: str) -> str:  # type: ignore[no-untyped-def]
    """The first node labelled ``label`` selected from the search (Alt+click, which
    expands the layers that hold it); the page's text once the picture is drawn again."""
    from tests.chromium import Browser

    assert isinstance(b, Browser)
    b.wait("the graph view", lambda: "op node count" in b.text(), timeout=180)
    b.wait("a picture", lambda: _not_blank(b.screenshot(str(ARTIFACTS / "stack.png"))) > 0.005, timeout=180)
    before = b.screenshot(str(ARTIFACTS / "stack.png"))
    b.alt_click(b.search_result(label))
    b.wait("the node selected", lambda: b.js("window.__exportlensSelected"), timeout=180)
    b.wait("the expanded layers drawn", lambda: b.screenshot(str(ARTIFACTS / "stack-expanded.png")) != before, timeout=300)
    return b.text()


def test_a_long_stack_of_layers_is_shown_in_sections(tmp_path: Path) -> None:
    """The page asks Model Explorer for artificial layers of ``SECTION_SIZE`` nodes
    (in its address): the 30 blocks of a stack are folded into sections, so expanding
    it lays out a few sections, not 30 blocks each with an edge from the value they all
    take. A person's own saved setting (Model Explorer's settings dialog) wins: then
    the address names none and the stack is one layer again."""
    from exportlens.core.picture.page import SECTION_SIZE
    from tests.chromium import Browser

    model = tmp_path / "stack.py"
    model.write_text(STACK)
    folder = tmp_path / "page"
    proc = run_cli("graph", str(model), "--format", "html", "-o", str(folder))
    assert proc.returncode == 0, proc.stderr

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    served = f"http://127.0.0.1:{httpd.server_address[1]}/"
    try:
        with Browser() as b:
            b.go(served)
            text = _expand_by_selecting(b, "aten.relu")
            address = b.js("new URLSearchParams(location.search).get('groupNodeChildrenCountThreshold')")
            assert address == str(SECTION_SIZE)
            assert "Artificial layer" in text, text[:600]
            assert "section_1_of_" in b.js("decodeURIComponent(location.search)"), "the expanded section is not in the UI state"
            # Model Explorer's own setting, saved by its settings dialog, is left alone.
            b.js("localStorage.setItem('model_explorer_settings', JSON.stringify({artificial_layer_node_count_threshold: 1000}))")
            b.go("about:blank")
            b.go(served)
            text = _expand_by_selecting(b, "aten.relu")
            assert b.js("new URLSearchParams(location.search).get('groupNodeChildrenCountThreshold')") is None
            assert "Artificial layer" not in text
    finally:
        httpd.shutdown()
        httpd.server_close()
