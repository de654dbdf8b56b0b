"""The page that draws the pictures: Model Explorer's web app, from its installed wheel.

Why not Model Explorer's own server: it is a Flask app that converts models with
torch in its process and answers the front end's requests; exportlens has the graph
JSON already (:mod:`exportlens.core.picture.graph`) and must not run torch in the
language server. So the built front end (``model_explorer/web_app`` of the pinned
``ai-edge-model-explorer`` wheel, Apache-2.0, never copied into this repository) is
served as it is, with six changes made as it is served:

* its ``index.html`` loses the ``@font-face`` rules that point at Google's font CDN
  and the ``preconnect`` to it (the same fonts ship in ``static_files``): no request
  leaves the machine;
* absolute ``/static_files/`` URLs (in the page and the stylesheet) become relative,
  and a first script sets ``<base href>`` to the page's own folder, so the page works
  under any path of any static web server (a CI artifact, a token-prefixed address);
* that script (``_SHIM``) answers the few requests the app makes of its server
  (``/api/v1/get_extensions``, ``load_graphs_json``, ``load_node_data``, the version
  check and its event stream) from the files beside the page (``exportlens/``), adds
  the ``data=`` parameter that names the models (so the app opens the graph, not its
  model-selection page) and the size of Model Explorer's artificial layers
  (:data:`SECTION_SIZE`), draws the overlay's legend, and reports a selected node
  (Model Explorer posts ``model-explorer-node-selected`` to ``window.parent``): to
  the window that embeds the page, if any (an editor's webview), and, when the page
  is served by the language server, to its ``exportlens/open`` address -- only when a
  person chose it (a click or a key within the last seconds), never for a selection
  the page makes itself. A page the language server serves also asks it, by long
  polling ``exportlens/events`` (:mod:`exportlens.core.picture.serve`), for what the
  editor wants: the nodes of the cursor's line, which it selects (Model Explorer's
  ``model-explorer-select-node-by-node-id`` message), and a newer result, for which it
  reloads; the address keeps the app's UI state (expanded layers, the selection);
* its layout worker gets one fix (:data:`_SECTION_FIX`): Model Explorer's artificial
  layers inside a top-level layer were laid out without their edges;
* its animations (an expansion's, the zoom's, a selected node's shake, the side
  panel's) can be turned off (:data:`_STILL_FIXES`): the address's ``animations=0``,
  the default for a page with a graph of more than :data:`STILL_OVER` nodes. Each of
  their frames redraws the whole graph, which in software WebGL (a browser without a
  GPU) takes a quarter to most of a second at that size. Model Explorer's own
  ``test_mode=1`` would also do it, but it stops reading and saving the person's
  display settings and node styling rules and shortens the search's pages;
* a graph of more than :data:`STILL_OVER` nodes is served shaped for the layout
  (:mod:`exportlens.core.picture.shape`): weights in the modules that use them, a
  stand-in in each repeated layer for a value every layer takes.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from exportlens.core.picture.graph import LEGEND, Picture
from exportlens.core.picture.shape import shaped

__all__ = ["INSTALL", "LICENSE", "SECTION_SIZE", "STILL_OVER", "Page", "WebAppMissing", "web_app"]

INSTALL = "pip install 'exportlens[graph]'"
LICENSE = (
    "The page is Google's Model Explorer (ai-edge-model-explorer, "
    "https://github.com/google-ai-edge/model-explorer), Apache License 2.0: "
    "https://www.apache.org/licenses/LICENSE-2.0"
)


class WebAppMissing(RuntimeError):
    """Model Explorer's package is not installed: the message says how to install it."""


def web_app() -> str:
    """The folder of Model Explorer's built web app in the installed package, found
    without importing the package (its ``__init__`` imports Flask and more)."""
    spec = importlib.util.find_spec("model_explorer")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        app = os.path.join(folder, "web_app")
        if os.path.isfile(os.path.join(app, "index.html")):
            return app
    raise WebAppMissing(f"the graph page needs Model Explorer's web app: {INSTALL}")


_FONT_FACE = re.compile(r"@font-face\{[^{}]*url\(https?://[^{}]*\}")
_PRECONNECT = re.compile(r'<link rel="preconnect"[^>]*>')
_ABSOLUTE_STATIC = re.compile(r"(?<=[(\"'])/static_files/")

# Model Explorer's "maximum number of nodes in an artificial layer" (its setting
# ``artificial_layer_node_count_threshold``, default 1,000), which the page puts in its
# address (``groupNodeChildrenCountThreshold``) unless the address or the person's own
# saved settings name one. Why: a layer whose children are a long stack of layers
# (80 decoder blocks) with values every block takes from one node before them (the
# rotary tables, the mask) is laid out with one edge from that node to each block,
# each drawn through every block before it -- drawn segments that grow with the
# square of the stack (~500,000 for 80 blocks), which Model Explorer's worker computes
# and the browser draws in every frame of the expansion's animation: expanding a
# layer of the 70B decoder took 11 s to the selection and over 90 s to the picture in
# headless Chromium (software WebGL). In sections of at most this many children
# (Model Explorer's own artificial layers, folded, filled in the graph's order) the
# long edges span one section: the same expansion takes about 1 s and 4 s
# (``bench/bench_graph_picture.py``; 24 gave 7 s, 12 about as 16). 16 splits a
# decoder's stack from a few blocks on, and also any other layer of more than 16
# nodes and layers of its own (a 39-op attention becomes three sections).
SECTION_SIZE = 16

# A page with a graph of more than this many nodes draws without animations, unless its
# address says ``animations=1``.
STILL_OVER = 1000

# Model Explorer's animations (0.1.34's main bundle), each skipped as its test mode
# skips it when the page sets ``window.__exportlensStill``: the expansion's progress
# and the side panel's width (1 at once), the zoom's and the SVG labels' transitions
# (0 s), the selected node's shake (none). Each old text occurs that many times; a
# bundle where one does not is served as it is (its animations on).
_STILL = "window.__exportlensStill"
_STILL_FIXES = (
    ("testMode?1:Math.min(1,", f"testMode||{_STILL}?1:Math.min(1,", 2),
    ("testMode?0:", f"testMode||{_STILL}?0:", 2),
    ("shakeNode(e){if(this.appService.testMode)return;", f"shakeNode(e){{if(this.appService.testMode||{_STILL})return;", 1),
)

# Model Explorer's bug (0.1.34, ``splitLargeGroupNodes`` in its worker), fixed as the
# worker is served: the sections of a layer at the top level (namespace "", as every
# PyTorch program's root module is) get the namespace ``"/" + label``, and every layer
# inside them an id with that leading "/", which the layout's edges (keyed by
# namespaces split on "/", empty parts dropped) never name: each layer in a section
# was laid out with no edges, its nodes in one row. The fix drops the leading "/".
_SECTION_FIX = ('ie=q==null?"":`${q.namespace}/${q.label}`', 'ie=q==null?"":q.namespace===""?q.label:`${q.namespace}/${q.label}`')

# What the app asks its server for, answered in the page. ``builtin_json`` is the one
# adapter a ``graphs://`` model needs.
_EXTENSIONS = [{"type": "adapter", "id": "builtin_json", "name": "JSON adapter", "description": "", "source_repo": "", "fileExts": ["json"]}]

_SHIM = r"""
(function () {
  var config = window.__exportlens;
  var base = location.pathname.replace(/[^/]*$/, "");
  document.querySelector("base").setAttribute("href", base);
  var files = base + "exportlens/";
  var params = new URLSearchParams(location.search);
  var changed = false;
  if (!params.get("data")) {
    params.set("data", JSON.stringify(config.data));
    changed = true;
  }
  // Model Explorer's artificial layers (``SECTION_SIZE``), unless the address or the
  // person's saved settings say otherwise.
  var saved = {};
  try { saved = JSON.parse(localStorage.getItem("model_explorer_settings") || "{}") || {}; } catch (e) {}
  if (!params.get("groupNodeChildrenCountThreshold") && saved.artificial_layer_node_count_threshold == null) {
    params.set("groupNodeChildrenCountThreshold", String(config.sectionSize));
    changed = true;
  }
  // Animations off (``STILL_OVER``) unless the address says ``animations=1``.
  if (!params.get("animations")) {
    params.set("animations", config.still ? "0" : "1");
    changed = true;
  }
  window.__exportlensStill = params.get("animations") === "0";
  if (changed) history.replaceState(null, "", base + "?" + params.toString());
  var realFetch = window.fetch.bind(window);
  function json(value) {
    return Promise.resolve(new Response(JSON.stringify(value), {headers: {"Content-Type": "application/json"}}));
  }
  window.fetch = function (input, init) {
    var url = new URL(typeof input === "string" ? input : input.url, location.href);
    if (url.origin !== location.origin || !/^\/api(post|stream)?\//.test(url.pathname)) {
      return realFetch(input, init);
    }
    var index = url.searchParams.get("graph_index") || url.searchParams.get("node_data_index") || "0";
    switch (url.pathname) {
      case "/api/v1/get_extensions": return json(config.extensions);
      case "/api/v1/check_new_version": return json({version: "", runningVersion: "", releaseUrl: "", desktopAppUrl: ""});
      case "/api/v1/load_graphs_json": return realFetch(files + "graphs/" + index + ".json");
      case "/api/v1/load_node_data":
        return realFetch(files + "node_data/" + index + ".json").then(function (r) { return r.text(); })
          .then(function (text) { return json({content: text}); });
      default: return json({error: "not available in exportlens's page: " + url.pathname});
    }
  };
  // The app's live-reload stream, for Model Explorer's own server only.
  window.EventSource = function () { return {addEventListener: function () {}, close: function () {}}; };
  // Model Explorer posts what happens (ready, a node selected) to window.parent. In a
  // frame (an editor's webview) that is the embedder, out of this script's sight: the
  // page becomes its own parent (``parent`` is replaceable) and this script forwards.
  var outer = window.parent !== window ? window.parent : null;
  if (outer) {
    try { window.parent = window; } catch (e) {}
  }
  // The model the selected pane shows (its index in the page), from the UI state the app
  // keeps in the address.
  function shownModel() {
    try {
      var panes = JSON.parse(new URLSearchParams(location.search).get("data") || "").uiState.paneStates;
      var selected = panes.filter(function (p) { return p.selected; })[0] || panes[0];
      return Math.max(0, config.labels.indexOf(selected.selectedCollectionLabel));
    } catch (e) {
      return 0;
    }
  }
  var userAt = 0;
  ["mousedown", "click", "keydown"].forEach(function (kind) {
    document.addEventListener(kind, function () { userAt = Date.now(); }, true);
  });
  // The editor's wishes, from the language server (``exportlens/events``, a long poll):
  // the nodes the cursor's line made, selected; a newer result, reloaded with the UI
  // state (expanded layers, selection) the address holds.
  var hostSelecting = null;
  window.__exportlensCursor = {nodes: [], selected: null};
  function select(wish, tries) {
    var nodes = wish.model === shownModel() ? wish.nodes : [];
    window.__exportlensCursor = {nodes: nodes, selected: null};
    if (!nodes.length) return;
    hostSelecting = nodes[0];
    window.postMessage({cmd: "model-explorer-select-node-by-node-id", nodeId: nodes[0]}, "*");
    // Before the graph is processed the app ignores it: again until it took.
    setTimeout(function () {
      if (hostSelecting === nodes[0] && window.__exportlensCursor.nodes === nodes && tries < 60) select(wish, tries + 1);
    }, 500);
  }
  var version = null;
  function poll(after) {
    realFetch(files + "events?after=" + after).then(function (r) {
      if (!r.ok) throw new Error(String(r.status));
      return r.json();
    }).then(function (events) {
      if (version === null) version = events.version;
      if (events.version !== version) {
        location.reload();
        return;
      }
      if (events.select && events.seq !== after) select(events.select, 0);
      poll(events.seq);
    }).catch(function () {
      setTimeout(function () { poll(after); }, 2000);
    });
  }
  if (config.open) poll(-1);
  window.addEventListener("message", function (event) {
    var msg = event.data || {};
    if (outer && event.source === window && typeof msg.cmd === "string" && msg.cmd.indexOf("model-explorer-") === 0) {
      outer.postMessage(msg, "*");
    }
    if (msg.cmd !== "model-explorer-node-selected" || !msg.nodeId) return;
    var model = shownModel();
    if (msg.nodeId === hostSelecting) {
      // The editor's cursor chose it: nothing to show back in the editor.
      hostSelecting = null;
      window.__exportlensCursor.selected = msg.nodeId;
      return;
    }
    window.__exportlensSelected = {model: model, node: msg.nodeId};
    // Only a person's choice moves the editor: not the selection a reload restores.
    if (config.open && Date.now() - userAt < 3000) {
      realFetch(files + "open?model=" + model + "&node=" + encodeURIComponent(msg.nodeId), {method: "POST"}).catch(function () {});
    }
  });
  document.addEventListener("DOMContentLoaded", function () {
    var box = document.createElement("div");
    box.id = "exportlens-legend";
    box.style.cssText = "position:fixed;left:152px;bottom:8px;z-index:1000;background:rgba(255,255,255,.92);" +
      "border:1px solid #ccc;border-radius:4px;padding:4px 8px;font:11px sans-serif;pointer-events:none";
    box.innerHTML = "<b>exportlens</b>" + config.legend.map(function (item) {
      return "<div><span style='display:inline-block;width:10px;height:10px;margin-right:4px;background:" +
        item[1] + "'></span>" + item[0] + "</div>";
    }).join("");
    document.body.appendChild(box);
  });
})();
"""


@dataclass(frozen=True)
class Page:
    """The page for some pictures: every file it is made of, by path under its folder.

    ``open``: the page reports a selected node to ``exportlens/open`` (the language
    server's page); a static page does not. ``shape``: the graphs are drawn shaped
    for the layout (:mod:`exportlens.core.picture.shape`); False draws them as Model
    Explorer's PyTorch adapter builds them (the bench compares the two).
    """

    pictures: Sequence[Picture]
    open: bool = False
    shape: bool = True

    @functools.cached_property
    def _graphs(self) -> list[bytes]:
        # Shaped where the layout needs it (over ``STILL_OVER`` nodes); a small graph is drawn as it is.
        return [json.dumps(shaped(p.graphs) if self.shape and p.node_count > STILL_OVER else p.graphs).encode() for p in self.pictures]

    def _config(self) -> dict[str, Any]:
        labels = [p.target for p in self.pictures]
        return {
            "data": {
                "models": [{"url": f"graphs://{label}/{i}"} for i, label in enumerate(labels)],
                "nodeData": [f"node_data://exportlens/{i}" for i in range(len(labels))],
                "nodeDataTargets": labels,
            },
            "labels": labels,
            "extensions": _EXTENSIONS,
            "legend": [list(item[:2]) for item in LEGEND],
            "open": self.open,
            "sectionSize": SECTION_SIZE,
            "still": any(p.node_count > STILL_OVER for p in self.pictures),
        }

    def index_html(self) -> bytes:
        with open(os.path.join(web_app(), "index.html"), encoding="utf-8") as f:
            text = f.read()
        text = _PRECONNECT.sub("", _FONT_FACE.sub("", text))
        text = _ABSOLUTE_STATIC.sub("static_files/", text)
        config = json.dumps(self._config()).replace("</", "<\\/")
        script = f"<script>window.__exportlens = {config};</script><script>{_SHIM}</script>"
        text = text.replace('<base href="/">', '<base href="/">' + script, 1)
        return text.encode()

    def data_file(self, path: str) -> bytes | None:
        """``graphs/N.json`` or ``node_data/N.json`` (under ``exportlens/``)."""
        m = re.fullmatch(r"(graphs|node_data)/(\d+)\.json", path)
        if m is None or int(m.group(2)) >= len(self.pictures):
            return None
        if m.group(1) == "graphs":
            return self._graphs[int(m.group(2))]
        return json.dumps(self.pictures[int(m.group(2))].node_data).encode()

    def file(self, path: str) -> bytes | None:
        """The bytes of ``path`` (relative, ``/``-separated) of the page, or None."""
        if path in ("", "index.html"):
            return self.index_html()
        if path.startswith("exportlens/"):
            return self.data_file(path.removeprefix("exportlens/"))
        return app_file(path)

    def files(self) -> Iterator[tuple[str, bytes]]:
        """Every file of the page, for writing it to a folder."""
        yield "index.html", self.index_html()
        for i in range(len(self.pictures)):
            for kind in ("graphs", "node_data"):
                data = self.data_file(f"{kind}/{i}.json")
                assert data is not None
                yield f"exportlens/{kind}/{i}.json", data
        yield "exportlens/LICENSE-model-explorer.txt", (LICENSE + "\n").encode()
        app = web_app()
        for folder, _dirs, names in os.walk(app):
            for name in sorted(names):
                rel = os.path.relpath(os.path.join(folder, name), app).replace(os.sep, "/")
                if rel != "index.html":
                    data = app_file(rel)
                    if data is not None:
                        yield rel, data


def app_file(path: str) -> bytes | None:
    """A file of the web app (stylesheets with relative ``static_files`` URLs), or None
    for a path that is not one (``..`` and absolute paths included)."""
    app = web_app()
    parts = path.split("/")
    if not path or any(p in ("", ".", "..") for p in parts) or path.startswith("/"):
        return None
    full = os.path.join(app, *parts)
    if not os.path.isfile(full):
        return None
    with open(full, "rb") as f:
        data = f.read()
    if path.endswith(".css"):
        data = _ABSOLUTE_STATIC.sub("static_files/", data.decode()).encode()
    elif re.fullmatch(r"worker-[A-Za-z0-9]+\.js", path):
        data = data.replace(_SECTION_FIX[0].encode(), _SECTION_FIX[1].encode(), 1)
    elif re.fullmatch(r"main-[A-Za-z0-9]+\.js", path):
        data = still_fixed(data)
    return data


def still_fixed(data: bytes) -> bytes:
    """Model Explorer's main bundle with its animations skipped when the page says so
    (:data:`_STILL_FIXES`), or as it is where one of them does not match."""
    if any(data.count(old.encode()) != count for old, _new, count in _STILL_FIXES):
        return data
    for old, new, _count in _STILL_FIXES:
        data = data.replace(old.encode(), new.encode())
    return data


def write(page: Page, folder: str) -> int:
    """The page's files under ``folder`` (created); the number of files written."""
    count = 0
    for rel, data in page.files():
        full = os.path.join(folder, *rel.split("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        count += 1
    return count
