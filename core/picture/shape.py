"""The graph JSON shaped for Model Explorer's layout: weights in their modules, shared
values drawn once per layer.

Why: Model Explorer lays out one level (a layer's children) at a time, and an edge
between two levels is lifted to their common parent. Exported as its PyTorch adapter
does (:mod:`exportlens.core.picture.graph`), a deployed decoder has two shapes that
cost it at every expansion: every parameter and buffer sits in one ``inputs`` layer
(888 nodes for an 80-layer decoder, folded into 56 sections), each with an edge into
the layer that uses it; and the values every layer takes from before the layers (the
rotary tables, the mask, the positions) are one producer with an edge into each of the
80 layers, which the layout draws through every layer between them. This reshapes the
graph the page draws (the JSON ``exportlens graph`` prints stays the adapter's):

* a parameter, buffer or constant goes into the namespace of the nodes that use it
  (``Linear_wq`` holds its weight and its ``aten.linear``), so the edge stays inside
  that module; a placeholder used across the top level stays in ``inputs``;
* a value used inside at least :data:`MIN_LAYERS` repeated layers (namespaces that
  differ in one index: ``Block_0`` .. ``Block_79``) from outside them gets, in each of
  those layers, a stand-in node (``unsqueeze_1@deploy.Block_42``) that the layer's
  nodes take it from; the stand-in's attributes name the real node and its line. The
  real node stays where it was, with its edges to anything outside the layers.

Every node keeps its id, label, attributes and (but for the placeholders moved)
namespace, so the cursor, search, the overlay and the UI state address the same nodes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = ["MIN_LAYERS", "real_id", "shaped"]

# Stand-ins only for a value that at least this many repeated layers take (as
# ``repeated.MIN_GROUP``: a model of two or three blocks keeps its edges).
MIN_LAYERS = 4
_STATE = ("PARAMETER", "BUFFER", "CONSTANT_TENSOR")
_INDEXED = re.compile(r"_\d+$")  # a namespace part of a ModuleList's item: ``deploy.Block_42``


def real_id(node_id: str) -> str:
    """The node a stand-in stands for (``unsqueeze_1@deploy.Block_42`` ->
    ``unsqueeze_1``); any other id as it is (fx names have no ``@``)."""
    return node_id.split("@", 1)[0]


def _common(namespaces: Iterable[str]) -> str:
    found: list[str] | None = None
    for ns in namespaces:
        parts = ns.split("/") if ns else []
        if found is None:
            found = parts
            continue
        n = 0
        while n < len(found) and n < len(parts) and found[n] == parts[n]:
            n += 1
        del found[n:]
    return "/".join(found or [])


def _layer(namespace: str) -> str | None:
    """The outermost repeated layer holding ``namespace`` (``a/Block_3/Attention`` ->
    ``a/Block_3``), or None."""
    parts = namespace.split("/") if namespace else []
    for i, part in enumerate(parts):
        if _INDEXED.search(part):
            return "/".join(parts[: i + 1])
    return None


def _attr(node: dict[str, Any], key: str) -> str | None:
    return next((a["value"] for a in node.get("attrs", ()) if a["key"] == key), None)


def shaped(graphs: dict[str, Any]) -> dict[str, Any]:
    """``graphs`` (Model Explorer's ``{"graphs": [...]}``) shaped for the layout; the
    argument is not changed (nodes that change are copies)."""
    return {**graphs, "graphs": [{**g, "nodes": _shape(g["nodes"])} for g in graphs["graphs"]]}


def _shape(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_id = {n["id"]: n for n in nodes}
    # Who takes each node's outputs: consumer index -> its edges (by position).
    users: dict[str, list[tuple[int, int]]] = {}
    for i, n in enumerate(nodes):
        for j, e in enumerate(n["incomingEdges"]):
            users.setdefault(e["sourceNodeId"], []).append((i, j))
    out = list(nodes)
    rerouted: dict[int, list[dict[str, Any]]] = {}  # consumer index -> its new edges
    standins: dict[str, list[dict[str, Any]]] = {}  # producer id -> its stand-ins
    taken = set(by_id)
    for producer, uses in users.items():
        source = by_id.get(producer)
        if source is None:
            continue
        home = source["namespace"]
        layers: dict[str, list[tuple[int, int]]] = {}
        for i, j in uses:
            layer = _layer(nodes[i]["namespace"])
            if layer is not None and not (home == layer or home.startswith(layer + "/")):
                layers.setdefault(layer, []).append((i, j))
        if len(layers) < MIN_LAYERS:
            continue
        where = f"{home} ({_attr(source, 'source')})" if _attr(source, "source") else home
        for layer, inside in layers.items():
            sid = f"{producer}@{layer.rsplit('/', 1)[-1]}"
            k = 1
            while sid in taken:
                k += 1
                sid = f"{producer}@{layer.rsplit('/', 1)[-1]}#{k}"
            taken.add(sid)
            attrs = [
                {"key": "stands for", "value": f"{producer}, in {where}: the value every layer takes, drawn in each instead of an edge into each"},
            ]
            if _attr(source, "source"):
                attrs.append({"key": "source", "value": str(_attr(source, "source"))})
            standins.setdefault(producer, []).append(
                {
                    "id": sid,
                    "label": producer,
                    "namespace": _common(nodes[i]["namespace"] for i, _ in inside),
                    "attrs": attrs,
                    "incomingEdges": [],
                    "outputsMetadata": source.get("outputsMetadata", []),
                }
            )
            for i, j in inside:
                edges = rerouted.setdefault(i, [dict(e) for e in nodes[i]["incomingEdges"]])
                edges[j]["sourceNodeId"] = sid
    for i, edges in rerouted.items():
        out[i] = {**nodes[i], "incomingEdges": edges}
    # Parameters, buffers and constants into the namespace of the nodes that use them
    # (directly: not through a stand-in).
    moved_users: dict[str, list[str]] = {}
    for n in out:
        for e in n["incomingEdges"]:
            moved_users.setdefault(e["sourceNodeId"], []).append(n["namespace"])
    for i, n in enumerate(out):
        if n["namespace"] != "inputs" or not (_attr(n, "input") or "").startswith(_STATE):
            continue
        home = _common(moved_users.get(n["id"], ()))
        if home:
            out[i] = {**n, "namespace": home}
    result: list[dict[str, Any]] = []
    for n in out:
        result.append(n)
        result.extend(standins.get(n["id"], ()))
    return result
