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
from typing import Any

import pytest

from tests.conftest import EXAMPLES, ROOT, as_a_shell_starts_it, run_cli

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
    proc = subprocess.Popen([sys.executable, "-m", "exportlens", "graph", str(MODEL), "--open"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=as_a_shell_starts_it)
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
            # A small graph keeps Model Explorer's animations (``STILL_OVER``).
            assert b.js("new URLSearchParams(location.search).get('animations')") == "1"
            assert b.js("window.__exportlensStill") is False
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


def _decoder(layers: int) -> Any:
    """A picture of a decoder of ``layers`` blocks, as :mod:`exportlens.core.picture.graph`
    writes one (parameters in ``inputs``, a rotary table made before the blocks and
    taken by each), built directly: ~1,200 nodes, no export."""
    from exportlens.core.picture.graph import Picture

    nodes: list[dict[str, Any]] = []

    def node(id: str, label: str, namespace: str, *sources: str, attrs: tuple[tuple[str, str], ...] = ()) -> None:
        nodes.append(
            {
                "id": id,
                "label": label,
                "namespace": namespace,
                "attrs": [{"key": k, "value": v} for k, v in attrs],
                "incomingEdges": [{"sourceNodeId": s, "sourceNodeOutputId": "0", "targetNodeInputId": str(j)} for j, s in enumerate(sources)],
                "outputsMetadata": [{"id": "0", "attrs": [{"key": "tensor_shape", "value": "float32[4, 64]"}]}],
            }
        )

    node("x", "x", "inputs", attrs=(("input", "USER_INPUT"),))
    for i in range(layers):
        for w in ("wq", "wo", "w1", "w2"):
            node(f"p_layers_{i}_{w}_weight", f"p_layers_{i}_{w}_weight", "inputs", attrs=(("input", f"PARAMETER layers.{i}.{w}.weight"),))
    node("cos", "aten.cos", "m.Decoder", "x", attrs=(("source", "m.py:5"),))
    prev = "x"
    for i in range(layers):
        block = f"m.Decoder/m.Block_{i}"
        node(f"pow_{i}", "aten.pow", f"{block}/m.RMSNorm_norm", prev, attrs=(("source", "m.py:10"),))
        node(f"mean_{i}", "aten.mean", f"{block}/m.RMSNorm_norm", f"pow_{i}", attrs=(("source", "m.py:10"),))
        node(f"mul_{i}", "aten.mul", f"{block}/m.RMSNorm_norm", prev, f"mean_{i}", attrs=(("source", "m.py:11"),))
        node(f"q_{i}", "aten.linear", f"{block}/m.Attention_attn/nn.Linear_wq", f"mul_{i}", f"p_layers_{i}_wq_weight")
        node(f"rot_{i}", "aten.mul", f"{block}/m.Attention_attn", f"q_{i}", "cos", attrs=(("source", "m.py:20"),))
        node(f"o_{i}", "aten.linear", f"{block}/m.Attention_attn/nn.Linear_wo", f"rot_{i}", f"p_layers_{i}_wo_weight")
        node(f"add_{i}", "aten.add", block, prev, f"o_{i}", attrs=(("source", "m.py:30"),))
        node(f"h_{i}", "aten.linear", f"{block}/m.MLP_mlp/nn.Linear_w1", f"add_{i}", f"p_layers_{i}_w1_weight")
        node(f"silu_{i}", "aten.silu", f"{block}/m.MLP_mlp", f"h_{i}", attrs=(("source", "m.py:40"),))
        node(f"d_{i}", "aten.linear", f"{block}/m.MLP_mlp/nn.Linear_w2", f"silu_{i}", f"p_layers_{i}_w2_weight")
        node(f"out_{i}", "aten.add", block, f"add_{i}", f"d_{i}", attrs=(("source", "m.py:31"),))
        prev = f"out_{i}"
    node("output", "output", "", prev)
    return Picture("Decoder", {"graphs": [{"id": "graph", "nodes": nodes}]}, {"name": "exportlens", "results": {}})


def _ui_state(b) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    try:
        return dict(json.loads(b.js("new URLSearchParams(location.search).get('data')"))["uiState"]["paneStates"][0])
    except (TypeError, ValueError, KeyError, IndexError):
        return {}


def _settled(b, shot: Path) -> bytes:  # type: ignore[no-untyped-def]
    """The picture once two screenshots a moment apart are the same (animations done)."""
    last = b.screenshot(str(shot))
    for _ in range(240):
        time.sleep(0.5)
        now = b.screenshot(str(shot))
        if now == last:
            return now
        last = now
    raise AssertionError("the picture never settled")


# Generous bounds for a loaded 2-core CI machine: the test proves the behaviour, the
# bench (bench/bench_graph_picture.py) measures the speed.
BOUND_S = 120


def test_an_80_layer_page_selects_from_the_cursor_and_opens_a_layer(tmp_path: Path) -> None:
    """The cursor's message (``model-explorer-select-node-by-node-id``, what the page
    sends for ``exportlens/cursor``) shows a node inside a folded layer: selected, its
    layers expanded, its line in the side panel. A folded layer double-clicked opens:
    its id among the expanded layers of the UI state and the picture redrawn. The
    page serves the graph shaped (no parameter left in ``inputs``, a stand-in of the
    table in each block), every node of the picture still in it. A graph this big is
    drawn without Model Explorer's animations (the address's ``animations=0``), unless
    the address asks for them."""
    from exportlens.core.picture.page import STILL_OVER, Page, write
    from tests.chromium import Browser

    picture = _decoder(80)
    folder = tmp_path / "page"
    write(Page([picture]), str(folder))
    served = json.loads((folder / "exportlens" / "graphs" / "0.json").read_text())["graphs"][0]["nodes"]
    ids = {n["id"]: n for n in served}
    assert set(ids) >= {n["id"] for n in picture.graphs["graphs"][0]["nodes"]}
    assert [n["id"] for n in served if n["namespace"] == "inputs"] == ["x"]
    assert ids["rot_40"]["incomingEdges"][1]["sourceNodeId"] == "cos@m.Block_40"

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/"
    shot = ARTIFACTS / "decoder.png"
    try:
        with Browser() as b:
            b.go(url)
            b.wait("the graph view", lambda: "op node count" in b.text(), timeout=BOUND_S)
            b.wait("a picture", lambda: _not_blank(b.screenshot(str(shot))) > 0.005, timeout=BOUND_S)
            assert picture.node_count > STILL_OVER
            assert b.js("new URLSearchParams(location.search).get('animations')") == "0"
            assert b.js("window.__exportlensStill") is True
            # The served bundle skips the expansion's animation when told: its progress 1 at once.
            assert b.js("fetch(Array.from(document.scripts).map(s => s.src).find(s => /main-/.test(s))).then(r => r.text()).then(t => t.includes('testMode||window.__exportlensStill?1:Math.min(1,'))") is True
            # The cursor on a line of block 70 (folded): the node shown with its line.
            b.js("window.postMessage({cmd: 'model-explorer-select-node-by-node-id', nodeId: 'silu_70'}, '*')")
            state = b.wait("the node selected", lambda: (s := _ui_state(b)) and s.get("selectedNodeId") == "silu_70" and s, timeout=BOUND_S)
            assert any("m.Block_70/m.MLP_mlp" in g for g in state["deepestExpandedGroupNodeIds"]), state
            b.wait("the node's info", lambda: "silu_70" in (t := b.text()) and "m.py:40" in t, timeout=BOUND_S)
            # Block 40, folded, shown (its id, sections included, from a first visit), then double-clicked.
            b.js("window.postMessage({cmd: 'model-explorer-select-node-by-node-id', nodeId: 'pow_40'}, '*')")
            state = b.wait("block 40 revealed", lambda: (s := _ui_state(b)) and s.get("selectedNodeId") == "pow_40" and s, timeout=BOUND_S)
            path = next(g for g in state["deepestExpandedGroupNodeIds"] if "m.Block_40/" in g).split("/")
            block = "/".join(path[: path.index("m.Block_40") + 1]) + "___group___"
            b.go("about:blank")
            b.go(url)
            b.wait("the graph view", lambda: "op node count" in b.text(), timeout=BOUND_S)
            b.js(f"window.postMessage({{cmd: 'model-explorer-select-node-by-node-id', nodeId: {block!r}}}, '*')")
            b.wait("block 40 shown", lambda: _ui_state(b).get("selectedNodeId") == block, timeout=BOUND_S)
            assert block not in _ui_state(b).get("deepestExpandedGroupNodeIds", [])
            _settled(b, shot)  # centred: the zoom's animation done
            # Model Explorer expands on a double-click over the node the mouse hovers.
            x, y, w, h = b.js("(() => { const r = document.querySelector('canvas').getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()")
            for dx in (1, 0):
                b.call("Input.dispatchMouseEvent", type="mouseMoved", x=x + w / 2 + dx, y=y + h / 2)
            before = _settled(b, shot)
            for kind, count in (("mousePressed", 1), ("mouseReleased", 1), ("mousePressed", 2), ("mouseReleased", 2)):
                b.call("Input.dispatchMouseEvent", type=kind, x=x + w / 2, y=y + h / 2, button="left", clickCount=count)
            b.wait("block 40 open", lambda: block in _ui_state(b).get("deepestExpandedGroupNodeIds", []), timeout=BOUND_S)
            b.wait("block 40 drawn", lambda: b.screenshot(str(ARTIFACTS / "decoder-open.png")) != before, timeout=BOUND_S)
            # The address's choice wins over the size.
            b.go("about:blank")
            b.go(url + "?animations=1")
            b.wait("the graph view", lambda: "op node count" in b.text(), timeout=BOUND_S)
            assert b.js("window.__exportlensStill") is False
    finally:
        httpd.shutdown()
        httpd.server_close()
