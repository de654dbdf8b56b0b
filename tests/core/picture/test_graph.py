"""The picture's graph JSON against Model Explorer's own PyTorch adapter.

For every ExportDB example torch exports, the bundled examples of the module-globals
form and the tiny transformer of ``bench/models``: torch's ``ExportedProgram`` goes
through ``PytorchExportedProgramAdapterImpl`` (the ``ai-edge-model-explorer`` wheel,
pinned in the ``graph`` extra), the same program's bytes through
:func:`exportlens.core.picture.graph.picture` (torch-free); node ids, labels,
namespaces and edges must be equal. exportlens's own attributes are checked against
the live graph: each node's ``source`` is the deepest frame of its ``stack_trace`` in
the file, each placeholder's ``input`` the signature's kind and target, and the
written buffer is marked on both ends.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from exportlens import program as P
from exportlens.core.model.results import Diagnostic, TargetResult
from exportlens.core.picture.graph import picture
from exportlens.core.serde.codec import SchemaError
from tests.conftest import EXAMPLES, ROOT

pytestmark = pytest.mark.slow

adapter = pytest.importorskip("model_explorer.pytorch_exported_program_adapter_impl")

GLOBAL_EXAMPLES = ["clean.py", "counter.py", "dynamic_ok.py", "input_mutation.py"]  # dynamic_shapes.py fails on purpose
TINY = ROOT / "bench" / "models" / "tiny_transformer.py"
CANNOT_EXPORT = {"dynamic_shape_round"}  # torch itself refuses (see tests/core/export/test_parity.py)
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def _export(model: Any, args: tuple, kwargs: dict | None, dyn: Any) -> torch.export.ExportedProgram:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(model, args, kwargs, dynamic_shapes=dyn, strict=False).run_decompositions({})


def _module_file(path: Path) -> tuple[torch.export.ExportedProgram, str]:
    spec = importlib.util.spec_from_file_location(f"_explorer_case_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ep = _export(mod.model, mod.example_args, getattr(mod, "example_kwargs", None), getattr(mod, "dynamic_shapes", None))
    return ep, str(path)


def _exportdb(name: str) -> tuple[torch.export.ExportedProgram, str]:
    from torch._export.db.examples import all_examples

    case = all_examples()[name]
    ep = _export(copy.deepcopy(case.model), case.example_args, case.example_kwargs or {}, case.dynamic_shapes)
    module = importlib.import_module(type(case.model).__module__)
    return ep, str(module.__file__)


def _cases() -> list[str]:
    from torch._export.db.examples import all_examples

    db = [f"exportdb:{n}" for n in sorted(all_examples()) if n not in CANNOT_EXPORT]
    return [f"example:{n}" for n in GLOBAL_EXAMPLES] + ["tiny_transformer"] + db


def _case(case: str) -> tuple[torch.export.ExportedProgram, str]:
    kind, _, name = case.partition(":")
    if kind == "example":
        return _module_file(EXAMPLES / name)
    if kind == "exportdb":
        return _exportdb(name)
    return _module_file(TINY)


class _Adapter(adapter.PytorchExportedProgramAdapterImpl):  # type: ignore[misc,name-defined]
    """The adapter less its output metadata, which raises on a symbolic size or a
    scalar output (``json.dumps`` of a SymInt), and printing a non-tensor input's
    value, which raises on a string: neither is what is compared here."""

    def add_outputs_metadata(self, fx_node: Any, node: Any) -> None:
        pass

    def print_tensor(self, tensor: Any, size_limit: int = 16) -> str:
        return super().print_tensor(tensor, size_limit) if isinstance(tensor, torch.Tensor) else repr(tensor)


def _theirs(ep: torch.export.ExportedProgram) -> list[dict[str, Any]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graphs = _Adapter(ep, {"const_element_count_limit": 16}).convert()["graphs"]
    assert len(graphs) == 1
    return [
        {
            "id": n.id,
            "label": n.label,
            "namespace": n.namespace,
            "edges": [(e.sourceNodeId, e.targetNodeInputId) for e in n.incomingEdges],
        }
        for n in graphs[0].nodes
    ]


def _ours(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "id": n["id"],
            "label": n["label"],
            "namespace": n["namespace"],
            "edges": [(e["sourceNodeId"], e["targetNodeInputId"]) for e in n["incomingEdges"]],
        }
        for n in nodes
    ]


def _target(ep: torch.export.ExportedProgram, name: str = "M") -> TargetResult:
    data = P.dumps(ep)
    return TargetResult(name, 1, "ok", signature=P.read_program(data).signature, program=data)


@pytest.mark.parametrize("case", _cases())
def test_nodes_labels_namespaces_and_edges_are_model_explorers(case: str) -> None:
    ep, path = _case(case)
    pic = picture(_target(ep), path=path)
    nodes = pic.graphs["graphs"][0]["nodes"]
    theirs = _theirs(ep)
    ours = _ours(nodes)
    # Labels of plain Python functions are their repr (an address) in the adapter.
    for t, o in zip(theirs, ours, strict=True):
        if " at 0x" in t["label"]:
            o["label"] = t["label"]
    assert ours == theirs
    # The exportlens attributes, against the live graph.
    by_id = {n["id"]: {a["key"]: a["value"] for a in n["attrs"]} for n in nodes}
    real = os.path.realpath(path)
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs if hasattr(s.arg, "name")}
    for node in ep.graph.nodes:
        attrs = by_id[node.name]
        if node.op == "call_function":
            frames = [(os.path.realpath(f), int(n)) for f, n in _FRAME.findall(node.meta.get("stack_trace") or "")]
            here = [line for f, line in frames if f == real]
            want = f"{os.path.realpath(path)}:{here[-1]}" if here else None
            assert attrs.get("source") == want, (node.name, frames)
        elif node.op == "placeholder" and node.name in specs:
            spec = specs[node.name]
            assert attrs["input"] == spec.kind.name + (f" {spec.target}" if spec.target else "")


def test_shapes_mutations_and_diagnostics_on_the_nodes() -> None:
    ep, path = _module_file(EXAMPLES / "counter.py")
    target = _target(ep, "Counter")
    # counter.py line 14: ``self.count.add_(1)`` (the buffer mutation the check reports).
    lines = Path(path).read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "add_(" in text)
    diag = Diagnostic("mutation/buffer", "the program mutates buffer count", line)
    err = Diagnostic("eager-error", "made up, at the same line", line)
    pic = picture(target, path=path, diagnostics=[diag, err])
    nodes = {n["id"]: n for n in pic.graphs["graphs"][0]["nodes"]}
    buffer = next(n for n in ep.graph.nodes if n.op == "placeholder" and n.name.startswith("b_"))
    assert {a["key"]: a["value"] for a in nodes[buffer.name]["attrs"]}["mutated"].endswith("buffer")
    written = next(s.arg.name for s in ep.graph_signature.output_specs if s.kind.name == "BUFFER_MUTATION")
    attrs = {a["key"]: a["value"] for a in nodes[written]["attrs"]}
    assert attrs["mutates"].startswith("buffer ")
    assert "mutation/buffer" in attrs["diagnostics"] and "eager-error" in attrs["diagnostics"]
    # The overlay: the error outranks the mutation on that node; the buffer shows the mutation.
    assert pic.node_data["results"][written]["value"] == "error"
    assert pic.node_data["results"][buffer.name]["value"] == "mutation"
    # Shapes on the outputs (and so on the edges).
    node = next(n for n in ep.graph.nodes if n.name == written)
    want = f"{str(node.meta['val'].dtype).removeprefix('torch.')}{list(node.meta['val'].shape)}"
    assert nodes[written]["outputsMetadata"][0]["attrs"][0]["value"] == want
    # Each node with a source leads to its line.
    assert pic.sources[written].line == line


def test_executorch_portable_fallback_is_its_own_overlay() -> None:
    """``lowering/executorch-not-delegated`` (information) at a line marks its nodes
    "portable", not "information": the XNNPACK-vs-portable split on the picture."""
    ep, path = _module_file(EXAMPLES / "clean.py")
    lines = Path(path).read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "return self.fc2(" in text)
    fallback = Diagnostic("lowering/executorch-not-delegated", "runs on portable kernels: aten.relu", line)
    pic = picture(_target(ep, "TinyMLP"), path=path, diagnostics=[fallback])
    marked = {n for n, r in pic.node_data["results"].items() if r["value"] == "portable"}
    made = {n["id"] for n in pic.graphs["graphs"][0]["nodes"] if n["label"] in ("aten.linear", "aten.relu")}
    assert len(made) == 3 and marked == made, (marked, made)
    # A diagnostic of another target is not this one's.
    other = Diagnostic("lowering/executorch-not-delegated", "x", line, target="Other")
    assert picture(_target(ep, "TinyMLP"), path=path, diagnostics=[other]).node_data["results"] == {}


def test_a_target_without_program_or_with_bad_bytes_is_a_schema_error() -> None:
    with pytest.raises(SchemaError):
        picture(TargetResult("X", 1, "error"), path="x.py")
    with pytest.raises(SchemaError):
        picture(TargetResult("X", 1, "ok", program=b"\x93garbage"), path="x.py")


def test_each_line_lists_the_nodes_it_made_from_every_frame(tmp_path: Path) -> None:
    """``made`` (what the editor's cursor selects): a line holds every computing node whose
    stack passes through it -- the call of a layer all of the layer's nodes -- checked
    against torch's own ``stack_trace`` of each node."""
    from tests.server.test_e2e_graph_page import NESTED

    file = tmp_path / "nested.py"
    file.write_text(NESTED)
    ep, path = _module_file(file)
    pic = picture(_target(ep), path=path)
    real = os.path.realpath(path)
    want: dict[int, set[str]] = {}
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        for match in re.finditer(r'File "([^"]+)", line (\d+)', node.meta.get("stack_trace") or ""):
            if os.path.realpath(match.group(1)) == real:
                want.setdefault(int(match.group(2)), set()).add(node.name)
    call = NESTED.splitlines().index("        y = self.inner(x)") + 1
    assert len(want.get(call, ())) >= 2, want  # the layer's call made the layer's nodes
    computing = {n.name for n in ep.graph.nodes if n.op == "call_function"}
    got = {line: {n for n in ids if n in computing} for (f, line), ids in pic.made.items() if f == real}
    assert {k: v for k, v in got.items() if v} == want
    # Ids come in graph order: the first is where the line's work begins.
    order = [n.name for n in ep.graph.nodes]
    for ids in pic.made.values():
        assert ids == sorted(ids, key=order.index)


def test_the_shaped_picture_keeps_every_node_with_its_line() -> None:
    """The graph the page draws (:mod:`exportlens.core.picture.shape`) of a real
    export: every node of the program with its label and attributes (its line among
    them), in its module -- a parameter or buffer now in the module that uses it --
    and each of the 4 blocks taking the rotary tables from its own stand-in."""
    from exportlens.core.picture.shape import shaped

    ep, path = _case("tiny_transformer")
    pic = picture(_target(ep), path=path)
    before = {n["id"]: n for n in pic.graphs["graphs"][0]["nodes"]}
    after = {n["id"]: n for n in shaped(pic.graphs)["graphs"][0]["nodes"]}
    assert {node.name for node in ep.graph.nodes} <= set(after)
    moved = 0
    for id, node in before.items():
        assert after[id]["label"] == node["label"] and after[id]["attrs"] == node["attrs"], id
        if after[id]["namespace"] != node["namespace"]:
            attrs = {a["key"]: a["value"] for a in node["attrs"]}
            assert node["namespace"] == "inputs" and attrs["input"].startswith(("PARAMETER", "BUFFER", "CONSTANT_TENSOR")), id
            moved += 1
    assert moved >= 4 * 4  # each block's weights at least
    standins = {id: n for id, n in after.items() if id not in before}
    blocks = {n["namespace"].split("/")[1] for n in standins.values()}
    assert len(blocks) == 4, blocks
    for producer in {n["label"] for n in standins.values()}:
        takers = [n for n in after.values() if any(e["sourceNodeId"] == producer for e in n["incomingEdges"])]
        inside = [n["id"] for n in takers if len(n["namespace"].split("/")) > 1 and n["namespace"].split("/")[1] in blocks]
        assert not inside, (producer, inside)
