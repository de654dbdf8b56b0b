"""The graph shaped for Model Explorer's layout (``exportlens.core.picture.shape``).

On a small graph written as :mod:`exportlens.core.picture.graph` writes a decoder's:
parameters in ``inputs``, a table made before the layers that every layer takes. The
shaped graph keeps every node (id, label, attributes), moves each parameter into the
module that uses it, and gives each layer its own stand-in for the table, so no edge
from outside the layers enters one; a stack of fewer than ``MIN_LAYERS`` layers keeps
its edges. Torch-free.
"""

from __future__ import annotations

import copy
from typing import Any

from exportlens.core.picture.shape import MIN_LAYERS, real_id, shaped


def _node(id: str, namespace: str, *sources: str, label: str = "aten.op", attrs: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "id": id,
        "label": label,
        "namespace": namespace,
        "attrs": attrs or [],
        "incomingEdges": [{"sourceNodeId": s, "sourceNodeOutputId": "0", "targetNodeInputId": str(j)} for j, s in enumerate(sources)],
        "outputsMetadata": [{"id": "0", "attrs": [{"key": "tensor_shape", "value": f"float32[{len(id)}]"}]}],
    }


def _decoder(layers: int) -> dict[str, Any]:
    nodes = [_node("x", "inputs", label="x", attrs=[{"key": "input", "value": "USER_INPUT"}])]
    nodes += [_node(f"p_layers_{i}_w", "inputs", label=f"p_layers_{i}_w", attrs=[{"key": "input", "value": f"PARAMETER layers.{i}.w"}]) for i in range(layers)]
    nodes.append(_node("b_freqs", "inputs", label="b_freqs", attrs=[{"key": "input", "value": "BUFFER freqs"}]))
    nodes.append(_node("table", "m.M", "b_freqs", attrs=[{"key": "source", "value": "m.py:7"}]))
    prev = "x"
    for i in range(layers):
        nodes.append(_node(f"lin_{i}", f"m.M/m.Block_{i}/nn.Linear_w", prev, f"p_layers_{i}_w"))
        nodes.append(_node(f"mul_{i}", f"m.M/m.Block_{i}", f"lin_{i}", "table"))
        prev = f"mul_{i}"
    nodes.append(_node("output", "", prev, label="output"))
    return {"graphs": [{"id": "graph", "nodes": nodes}]}


def _nodes(graphs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in graphs["graphs"][0]["nodes"]}


def test_weights_go_to_their_module_and_each_layer_takes_the_table_from_its_own_stand_in() -> None:
    layers = 6
    original = _decoder(layers)
    kept = copy.deepcopy(original)
    result = shaped(original)
    assert original == kept, "the argument was changed"
    before, after = _nodes(original), _nodes(result)
    # Every node is still there, with its label and attributes.
    for id, node in before.items():
        assert after[id]["label"] == node["label"] and after[id]["attrs"] == node["attrs"]
    for i in range(layers):
        assert after[f"p_layers_{i}_w"]["namespace"] == f"m.M/m.Block_{i}/nn.Linear_w"
    assert after["b_freqs"]["namespace"] == "m.M"  # used by the model itself, outside the layers
    assert after["x"]["namespace"] == "inputs"  # the user's input stays where the adapter puts it
    # No edge from the table into a layer: each layer's own stand-in, inside it, names it.
    standins = {id: n for id, n in after.items() if id not in before}
    assert len(standins) == layers
    for i in range(layers):
        [edge] = [e for e in after[f"mul_{i}"]["incomingEdges"] if e["targetNodeInputId"] == "1"]
        standin = standins[edge["sourceNodeId"]]
        assert standin["namespace"] == f"m.M/m.Block_{i}"
        assert standin["label"] == "table" and standin["outputsMetadata"] == before["table"]["outputsMetadata"]
        attrs = {a["key"]: a["value"] for a in standin["attrs"]}
        assert attrs["source"] == "m.py:7" and attrs["stands for"].startswith("table, in m.M")
        assert real_id(standin["id"]) == "table"  # a stand-in selected in the page leads to the table's line
    assert not any(e["sourceNodeId"] == "table" for n in after.values() for e in n["incomingEdges"])
    # The rest of the edges are as they were.
    for i in range(layers):
        assert after[f"lin_{i}"]["incomingEdges"] == before[f"lin_{i}"]["incomingEdges"]


def test_a_few_layers_keep_their_edges() -> None:
    original = _decoder(MIN_LAYERS - 1)
    after = _nodes(shaped(original))
    assert set(after) == set(_nodes(original))
    assert [e["sourceNodeId"] for e in after["mul_0"]["incomingEdges"]] == ["lin_0", "table"]
    assert after["p_layers_0_w"]["namespace"] == "m.M/m.Block_0/nn.Linear_w"  # weights move at any size


def test_a_value_made_inside_a_layer_is_not_a_shared_value() -> None:
    """A node's users in its own layer (and the next layer's input) are ordinary edges."""
    original = _decoder(MIN_LAYERS + 2)
    nodes = original["graphs"][0]["nodes"]
    # lin_0's output also feeds every other layer's mul: a value from layer 0 into the others.
    for n in nodes:
        if n["id"].startswith("mul_") and n["id"] != "mul_0":
            n["incomingEdges"].append({"sourceNodeId": "lin_0", "sourceNodeOutputId": "0", "targetNodeInputId": "2"})
    after = _nodes(shaped(original))
    assert [e["sourceNodeId"] for e in after["mul_0"]["incomingEdges"]] == ["lin_0", "table@m.Block_0"]
    assert after["mul_3"]["incomingEdges"][2]["sourceNodeId"] == "lin_0@m.Block_3"
