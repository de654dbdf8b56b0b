"""The graph as a picture at deployment size: the 80-layer decoder of
``bench_big_editor.py`` (Llama-3-70B's sizes, fake weights, ~5,500 nodes), or with
``--size 8b`` the same decoder at Llama-3-8B's sizes (32 layers).

- the graph JSON (:func:`exportlens.core.picture.graph.pictures`, what ``exportlens
  graph`` and the language server's page build) and its shaping for the layout
  (:mod:`exportlens.core.picture.shape`), beside ``read_program`` of the same bytes
  (what every editor feature already pays once per result): medians of 5;
- in headless chromium (``tests/chromium.py``), each round a fresh load of the page
  as exportlens serves it (shaped, without animations at this size) and, in the same
  browser and rounds, with ``--compare animated`` (the default) the same page with
  Model Explorer's animations (the address's ``animations=1``), or with ``--compare
  unshaped`` the graph as Model Explorer's PyTorch adapter builds it (the page before
  issue 47, animations as the page's default):

  * the first picture: from the navigation to the graph view, and to a drawn,
    non-blank canvas (layers folded), beside ``examples/counter.py``'s;
  * opening layer 40 as a user does: the folded layer is shown (not timed), then
    double-clicked;
  * selecting a node inside folded layer 70 from the search (its id typed, then
    Alt+click on the result): Model Explorer expands the layers that hold it;
  * the cursor: the editor's cursor on a line of layer 60 (the page's
    ``model-explorer-select-node-by-node-id`` message, as the language server's page
    sends it).

  Each action is timed from the action to: ``laid out`` (Model Explorer's layout
  worker answered: a hook on the page's ``Worker``, added by the bench only),
  ``answered`` (the page recorded the result in its UI state: the expanded layer, the
  selection), ``drawn`` (the page's second frame begun after the worker's answer:
  the first frame drawing it is done) and ``settled`` (the frame after the last slow
  one: the expansion's and the zoom's animations done, where on), from the page's own frame
  timestamps (the same hook). A screenshot after the action must differ from the one
  just before it, else the action counts as not drawn. Medians of ``--rounds``.

Targets (issue 47): first picture <= 3 s; opening a layer and selecting a node in a
folded layer <= 1 s each, to the page answering with the result drawn. The machine's
load (``os.getloadavg``) is printed before and after: on a shared machine the drawing
(Chromium's software WebGL and compositing) slows with it.

    .venv/bin/python bench/bench_graph_picture.py [--size 70b|8b] [--layers N] [--rounds N] [--sections N] [--compare animated|unshaped]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_big_editor import sizes_70b  # noqa: E402
from bench_bigmodels import deploy_file  # noqa: E402


def sizes_8b(layers: int) -> str:
    return f"DIM, LAYERS, HEADS, KV_HEADS, HIDDEN, VOCAB, MAX_SEQ = 4096, {layers}, 32, 8, 14336, 128256, 2048"


def median_ms(fn, runs: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def result_of(path: Path, cache: Path):  # type: ignore[no-untyped-def]
    from exportlens.core.pipeline import Overrides, Pipeline

    pipeline = Pipeline(Overrides(timeout_s=3600, cache_dir=str(cache)))
    [result] = pipeline.run([str(path)], 1).results
    assert result.targets and result.targets[0].program, result.diagnostics
    return result


def serve(folder: Path) -> str:
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}/"


HOOK = """
(function () {
  window.__benchWorker = [];
  var Real = window.Worker;
  window.Worker = function (url, options) {
    var w = new Real(url, options);
    w.addEventListener("message", function (e) {
      window.__benchWorker.push([e.data && e.data.eventType, performance.now()]);
    });
    return w;
  };
  window.Worker.prototype = Real.prototype;
  // The page's frames: a timestamp at the start of each.
  window.__benchFrames = [];
  (function frame() {
    requestAnimationFrame(function () {
      var f = window.__benchFrames;
      f.push(performance.now());
      if (f.length > 4000) f.splice(0, 2000);
      frame();
    });
  })();
})();
"""

# In the page, once its frames run at the display's pace again: seconds from the action
# to the layout worker's answer, to the second frame begun after it (the first frame
# with the answer drawn is done) and to the frame after the last slow one (the
# animations done).
FRAMES = """(() => {
  const at = window.__benchAt, w = window.__benchWorker.length ? window.__benchWorker[0][1] : null;
  const f = window.__benchFrames;
  if (w === null || f.length < 30 || f[f.length - 30] < w) return null;
  const recent = f.slice(-30);
  for (let i = 1; i < recent.length; i++) if (recent[i] - recent[i - 1] > 100) return null;
  const after = f.filter(t => t > w);
  let settled = after[0];
  for (let i = 1; i < after.length; i++) if (after[i] - after[i - 1] > 100) settled = after[i];
  return [(w - at) / 1000, ((after.length > 1 ? after[1] : after[0]) - at) / 1000, (settled - at) / 1000];
})()"""


def ui_state(browser) -> dict:  # type: ignore[no-untyped-def]
    data = browser.js("new URLSearchParams(location.search).get('data')")
    try:
        return dict(json.loads(data)["uiState"]["paneStates"][0])
    except (TypeError, ValueError, KeyError, IndexError):
        return {}


def first_picture(browser, url: str, shot: Path) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Seconds to the graph view (its node count shown) and to a drawn canvas."""
    from tests.e2e.test_graph_page import _not_blank

    browser.go("about:blank")
    started = time.perf_counter()
    browser.go(url)
    browser.wait("the graph view", lambda: "op node count" in browser.text(), timeout=300)
    view = time.perf_counter() - started
    browser.wait("a drawn canvas", lambda: _not_blank(browser.screenshot(str(shot))) > 0.005, timeout=300)
    return view, time.perf_counter() - started


def settle(browser, shot: Path) -> bytes:  # type: ignore[no-untyped-def]
    """The page's picture once two screenshots a moment apart are the same."""
    last = browser.screenshot(str(shot))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = browser.screenshot(str(shot))
        if now == last:
            return now
        last = now
    return last


def timed(browser, act, answered, shot: Path) -> dict[str, float | None]:  # type: ignore[no-untyped-def]
    """``act()``, then seconds to the layout worker's answer, to ``answered()`` (the UI
    state), to the page's first frame with the answer drawn and to the end of its
    animations (None: not within 120 s). No screenshot meanwhile: in software WebGL
    each one is a frame more to draw. One after, which must differ from the one before."""
    before = settle(browser, shot)
    browser.js("window.__benchWorker = []; window.__benchFrames = []; window.__benchAt = performance.now()")
    started = time.perf_counter()
    act()
    out: dict[str, float | None] = {"laid out": None, "answered": None, "drawn": None, "settled": None}
    try:
        browser.wait("the answer", answered, timeout=120)
        out["answered"] = time.perf_counter() - started
        out["laid out"], out["drawn"], out["settled"] = browser.wait("the frames", lambda: browser.js(FRAMES), timeout=120)
    except AssertionError:
        pass
    if browser.screenshot(str(shot)) == before:
        out["drawn"] = out["settled"] = None  # nothing new on the screen
    return out


def select_message(browser, node: str) -> None:  # type: ignore[no-untyped-def]
    browser.js(f"window.postMessage({{cmd: 'model-explorer-select-node-by-node-id', nodeId: {node!r}}}, '*')")


def layer_id(browser, node: str, part: str) -> str:  # type: ignore[no-untyped-def]
    """Model Explorer's id of the layer ``part`` (``deploy.Block_40``) that holds
    ``node``, sections included: ``node`` revealed, then read from the UI state."""
    select_message(browser, node)
    state = browser.wait("the node revealed", lambda: (s := ui_state(browser)) and s.get("selectedNodeId") == node and s.get("deepestExpandedGroupNodeIds") and s, timeout=180)
    for group in state["deepestExpandedGroupNodeIds"]:
        parts = group.removesuffix("___group___").split("/")
        if part in parts:
            return "/".join(parts[: parts.index(part) + 1]) + "___group___"
    raise AssertionError(f"no layer {part} above {node}: {state}")


def in_layer(nodes: list[dict], index: int) -> tuple[str, str]:
    """The first op node of repeated layer ``index`` (``Block_<index>``), and that
    layer's namespace part."""
    for n in nodes:
        for part in n["namespace"].split("/"):
            if part.endswith(f"_{index}") and n["namespace"] != "inputs" and "@" not in n["id"] and n["label"].startswith("aten."):
                return n["id"], part
    raise AssertionError(f"no layer {index}")


def round_of(browser, url: str, nodes: list[dict], work: Path, layers: int) -> dict[str, dict[str, float | None]]:  # type: ignore[no-untyped-def]
    out: dict[str, dict[str, float | None]] = {}
    view, drawn = first_picture(browser, url, work / "first.png")
    out["first picture"] = {"graph view": view, "drawn": drawn}
    opened, opened_part = in_layer(nodes, layers // 2)
    search, search_part = in_layer(nodes, layers * 7 // 8)
    nodes_by_id = {n["id"]: n for n in nodes}
    layer_nodes = {n["id"] for n in nodes if search_part in n["namespace"].split("/")}
    cursor, _ = in_layer(nodes, layers * 3 // 4)
    # Opening a layer: the id of the layer (its section named), from a first visit.
    group = layer_id(browser, opened, opened_part)
    first_picture(browser, url, work / "first.png")
    select_message(browser, group)  # the folded layer shown, centred (not timed)
    browser.wait("the layer shown", lambda: ui_state(browser).get("selectedNodeId") == group, timeout=180)
    settle(browser, work / "open.png")  # centred: the zoom's animation done
    x, y, w, h = browser.js("(() => { const r = document.querySelector('canvas').getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()")
    for dx in (1, 0):  # Model Explorer expands on a double-click over the node the mouse hovers
        browser.call("Input.dispatchMouseEvent", type="mouseMoved", x=x + w / 2 + dx, y=y + h / 2)

    def double_click() -> None:
        for kind, n in (("mousePressed", 1), ("mouseReleased", 1), ("mousePressed", 2), ("mouseReleased", 2)):
            browser.call("Input.dispatchMouseEvent", type=kind, x=x + w / 2, y=y + h / 2, button="left", clickCount=n)

    out[f"open layer {layers // 2}"] = timed(browser, double_click, lambda: group in ui_state(browser).get("deepestExpandedGroupNodeIds", []), work / "open.png")
    # Selecting a node inside a folded layer from the search: its id typed (Model
    # Explorer also lists the nodes that take it), then Alt+click on the first result
    # with its label.
    query = search
    browser.js(
        "(() => { const i = document.querySelector('input[placeholder*=\"Search\"]'); i.focus();"
        f" i.value = {query!r}; i.dispatchEvent(new Event('input', {{bubbles: true}})); }})()"
    )
    label = nodes_by_id[search]["label"]
    result = f"Array.from(document.querySelectorAll('div.label > span.node-label')).find(e => e.textContent.trim() === {label!r})"
    browser.wait("the search result", lambda: browser.js(f"!!{result}"), timeout=120)
    out[f"search, layer {layers * 7 // 8}"] = timed(
        browser,
        lambda: browser.alt_click(result),
        lambda: f"{search_part}/" in (ui_state(browser).get("selectedNodeId") or "") or ui_state(browser).get("selectedNodeId") in layer_nodes,
        work / "search.png",
    )
    # The editor's cursor.
    out[f"cursor, layer {layers * 3 // 4}"] = timed(
        browser, lambda: select_message(browser, cursor), lambda: ui_state(browser).get("selectedNodeId") == cursor, work / "cursor.png"
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("70b", "8b"), default="70b", help="the decoder's sizes: Llama-3-70B's (80 layers) or Llama-3-8B's (32)")
    parser.add_argument("--layers", type=int, default=None, help="decoder layers (default: the size's)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each a fresh load of the page (medians are printed)")
    parser.add_argument("--work", default=None, metavar="DIR", help="the folder of the files and their result cache (default: a new one; an earlier run's skips the export)")
    parser.add_argument("--sections", type=int, default=None, metavar="N", help="Model Explorer's artificial layers of at most N children (default: the page's SECTION_SIZE; 1000 is Model Explorer's own default)")
    parser.add_argument("--compare", choices=("animated", "unshaped"), default="animated", help="the second page: the same with Model Explorer's animations, or the graph unshaped")
    args = parser.parse_args()
    from exportlens.core.picture.graph import pictures
    from exportlens.core.picture.page import SECTION_SIZE, Page, write
    from exportlens.core.picture.shape import shaped
    from exportlens.program import read_program
    from tests.chromium import Browser

    layers = args.layers or (80 if args.size == "70b" else 32)
    sizes = sizes_70b(layers) if args.size == "70b" else sizes_8b(layers)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-graph-picture-"))
    work.mkdir(parents=True, exist_ok=True)
    name = f"deploy_{args.size}" + (f"_{layers}" if args.layers else "")
    path = work / f"{name}.py"
    path.write_text(deploy_file(sizes).replace("def deploy_8b", f"def {name}"))
    small = work / "counter.py"
    small.write_text((ROOT / "examples" / "counter.py").read_text())
    started = time.perf_counter()
    big, tiny = result_of(path, work / "cache"), result_of(small, work / "cache")
    print(f"export (or the cache's result): {time.perf_counter() - started:.0f} s (both files, fake weights); --work {work} reuses it")
    program = big.targets[0].program
    nodes = len(read_program(program).nodes)
    read = median_ms(lambda: read_program(program))
    built = median_ms(lambda: pictures(big))
    [picture] = pictures(big)
    shaping = median_ms(lambda: shaped(picture.graphs))
    drawn_nodes = shaped(picture.graphs)["graphs"][0]["nodes"]
    print(
        f"graph JSON: {built:.0f} ms for {picture.node_count} nodes (target <= 300), shaped for the layout in {shaping:.0f} ms "
        f"({len(drawn_nodes) - picture.node_count} stand-ins) | read_program of the same bytes {read:.0f} ms ({nodes} nodes)"
    )
    folders = {}
    for key, result, shape in (("shaped", big, True), ("unshaped", big, False), ("tiny", tiny, True)) if args.compare == "unshaped" else (("shaped", big, True), ("tiny", tiny, True)):
        folders[key] = work / f"page-{key}"
        write(Page(pictures(result), shape=shape), str(folders[key]))
    query = f"?groupNodeChildrenCountThreshold={args.sections}" if args.sections is not None else ""
    load_before = os.getloadavg()
    other = args.compare
    rounds: dict[str, list[dict[str, dict[str, float | None]]]] = {"shaped": [], other: []}
    with Browser() as browser:
        browser.call("Page.addScriptToEvaluateOnNewDocument", source=HOOK)
        tiny_view, tiny_drawn = first_picture(browser, serve(folders["tiny"]), work / "tiny.png")
        urls = {key: serve(folders[key]) + query for key in rounds if key in folders}
        if other == "animated":
            urls[other] = urls["shaped"] + ("&" if query else "?") + "animations=1"
        animated: dict[str, bool] = {}
        for _ in range(args.rounds):
            for key in rounds:
                (work / key).mkdir(exist_ok=True)
                rounds[key].append(round_of(browser, urls[key], picture.graphs["graphs"][0]["nodes"] if key == "unshaped" else drawn_nodes, work / key, layers))
                animated[key] = browser.js("new URLSearchParams(location.search).get('animations')") == "1"
        sections = browser.js("new URLSearchParams(location.search).get('groupNodeChildrenCountThreshold')")
    load_after = os.getloadavg()
    default = " (the page's default)" if sections == str(SECTION_SIZE) else ""
    print(f"chromium, {args.rounds} rounds (medians, seconds), artificial layers of at most {sections} children{default}; counter.py's first picture: view {tiny_view:.1f}, drawn {tiny_drawn:.1f}")
    print(f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f} ({os.cpu_count()} cores)")
    names = {key: ("shaped" if key != "unshaped" else "unshaped") + (", animated" if animated[key] else ", still") for key in rounds}
    print(f"{'':24} {names['shaped']:>34} {names[other]:>34}")
    for action in rounds["shaped"][0]:
        for measure in rounds["shaped"][0][action]:
            row = []
            for key in ("shaped", other):
                values = [r[action][measure] for r in rounds[key]]
                got = [v for v in values if v is not None]
                text = f"{statistics.median(got):.2f} ({min(got):.2f}-{max(got):.2f})" if got else "-"
                if len(got) < len(values):
                    text += f" {len(values) - len(got)} over 120 s"
                row.append(text)
            print(f"{action + ': ' + measure:<40} {row[0]:>18} {row[1]:>34}")
    print(f"screenshots: {work}/shaped, {work}/{other}")


if __name__ == "__main__":
    main()
