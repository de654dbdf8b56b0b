"""A program as Model Explorer's graph JSON, with exportlens's findings on every node.

Why: at the sizes people export (thousands of nodes) the graph reads as a picture,
folded by module; Google's Model Explorer draws one from its graph JSON, but knows
nothing of where a node came from in the user's code nor of what the export found.
This builds that JSON from the program bytes the cache holds, without torch (the
language server must not import it), so every front end -- the CLI's page, the
language server's page, an editor's webview -- draws the same picture.

The nodes, labels, namespaces and edges are those Model Explorer's own PyTorch
adapter (``PytorchExportedProgramAdapterImpl``) builds from torch's
``ExportedProgram`` (a test compares them), so repeated layers fold as it folds them:
one node per fx node of the top graph, ``id`` the node's name, ``label`` the op
without its overload (``aten.linear``), ``namespace`` the ``nn_module_stack`` as
``Class_attr`` parts joined by ``/`` (placeholders in ``inputs``). One deliberate
difference: an edge's ``sourceNodeOutputId`` is the output it carries (a
``getitem``'s index, else ``0``), where the adapter writes the consumer's position
among the producer's users; so the shape shown on an edge is the right output's.

On top, exportlens's attributes (``attrs``): ``source`` (``file.py:LINE``, the deepest
frame of the node in a file of the project; the signature's line for inputs and
outputs), ``input``/``output`` (a spec's kind and target), ``mutates`` (the buffer or
input an output value is written back to), ``mutated`` (on a placeholder the program
writes), ``diagnostics``. The same findings also come as one node-data overlay
(Model Explorer's node data: a string value and a colour per node) with its legend.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from exportlens.core.model.results import Diagnostic, FileResult, TargetResult
from exportlens.core.model.signature import TensorMeta, named_dims
from exportlens.core.project import notebooks
from exportlens.core.project.notebooks import NotebookModule
from exportlens.core.serde import schema as S
from exportlens.core.serde.codec import SchemaError
from exportlens.core.serde.reader import _Reader, decode_document

__all__ = ["GRAPH_ID", "LEGEND", "Picture", "NodeSource", "picture", "pictures"]

GRAPH_ID = "graph"  # the adapter's id for the one graph of a program

# Overlay categories, most important first: a node shows the first that applies.
# (value shown on the node, background colour, what it means)
LEGEND: tuple[tuple[str, str, str], ...] = (
    ("error", "#f28b82", "a diagnostic of severity error at a line of this node"),
    ("warning", "#fdd663", "a warning at a line of this node"),
    ("portable", "#fcc3e4", "ExecuTorch runs this node's line on portable kernels (not delegated)"),
    ("mutation", "#aecbfa", "the program writes this value back to a buffer or input, or the input it writes"),
    ("information", "#ccf0d4", "an information diagnostic at a line of this node"),
)
_COLOURS = {name: colour for name, colour, _ in LEGEND}
_RANK = {name: i for i, (name, _, _) in enumerate(LEGEND)}

# Modules whose functions are builtins: the adapter labels every builtin ``getitem``.
_BUILTIN_MODULES = ("_operator.", "operator.", "math.", "builtins.")


@dataclass(frozen=True)
class NodeSource:
    """Where a node of the picture leads: a real path and a 1-based line."""

    file: str
    line: int


@dataclass
class Picture:
    """One target's picture: the graph JSON, the overlay, each node's source."""

    target: str
    graphs: dict[str, Any]  # Model Explorer's ``{"graphs": [...]}``
    node_data: dict[str, Any]  # Model Explorer's GraphNodeData for the overlay
    sources: dict[str, NodeSource] = field(default_factory=dict)  # node id -> its line
    # (real file, 1-based line) -> the ids of the nodes that line made, in graph order:
    # every project frame of a node's stack (the call of a layer names all its nodes)
    made: dict[tuple[str, int], list[str]] = field(default_factory=dict)

    @property
    def node_count(self) -> int:
        return sum(len(g["nodes"]) for g in self.graphs["graphs"])


def _label(op: str, name: str, target: str) -> str:
    if op == "output":
        return "output"
    if op == "placeholder":
        return name
    if op == "get_attr":
        return target
    if target.startswith(_BUILTIN_MODULES):
        return "getitem"
    if target.startswith("torch.ops."):
        parts = target.removeprefix("torch.ops.").split(".")
        # An OpOverload (namespace.op.overload) shows its packet; a higher-order op
        # (torch.ops.higher_order.cond) its own name.
        if len(parts) == 3:
            return f"{parts[0]}.{parts[1]}"
        return parts[-1]
    return target


def _class_name(text: str) -> str:
    """``<class 'pkg.Net'>`` (a class stored by ``str``) -> ``pkg.Net``; a name stays."""
    if text.startswith("<class '") and text.endswith("'>"):
        text = text[8:-2]
    return text.removeprefix("builtins.")


def _namespace(stack: Sequence[tuple[str, str]]) -> str:
    return "/".join(_class_name(cls) + ("_" + path.split(".")[-1] if path else "") for path, cls in stack)


def _inputs(args: Any, found: list[int], seen: set[int]) -> None:
    """Node indices an argument refers to, first use first (fx's ``all_input_nodes``)."""
    if type(args) is not list or not args:
        return
    tag = args[0]
    if tag == S.A_NODE:
        i = args[1]
        if i not in seen:
            seen.add(i)
            found.append(i)
    elif tag in (S.A_LIST, S.A_TUPLE):
        for a in args[1:]:
            _inputs(a, found, seen)
    elif tag == S.A_DICT:
        for _k, a in args[1:]:
            _inputs(a, found, seen)


def _shape(meta: TensorMeta, names: Mapping[str, str]) -> str:
    return f"{meta.dtype}[{', '.join(named_dims(str(d), names) for d in meta.shape)}]"


class _Files:
    """Real paths, once per file name, and the project files among them."""

    def __init__(self, project: Iterable[str], root: str | None) -> None:
        self._real: dict[str, str] = {}
        self._modules: dict[str, NotebookModule | None] = {}
        self.project = {self.real(f) for f in project}
        self.root = root

    def real(self, path: str) -> str:
        found = self._real.get(path)
        if found is None:
            try:
                found = os.path.realpath(path)
            except (OSError, ValueError):
                found = path
            self._real[path] = found
        return found

    def line(self, real: str, line: int) -> str:
        """``file:line``; a notebook's line as its cell's (``nb.ipynb:cell 3:2``), the
        notebook read from the disk (a module line past it stays as it is)."""
        if notebooks.is_notebook(real):
            if real not in self._modules:
                try:
                    self._modules[real] = notebooks.read(real)
                except (OSError, notebooks.NotebookError):
                    self._modules[real] = None
            module = self._modules[real]
            found = module.place(line) if module is not None else None
            if found is not None:
                return f"{self.place(real)}:cell {found[0]}:{found[1]}"
        return f"{self.place(real)}:{line}"

    def place(self, real: str) -> str:
        if self.root is not None:
            rel = os.path.relpath(real, self.root)
            if not rel.startswith(".."):
                return rel
        return real


def picture(
    target: TargetResult,
    *,
    path: str,
    project_files: Iterable[str] = (),
    diagnostics: Iterable[Diagnostic] = (),
    root: str | None = None,
) -> Picture:
    """The picture of ``target``'s program (``target.program``, read without torch).

    ``path`` is the declaring file; ``project_files`` the other files of the project
    a node's source may be in (local modules); ``diagnostics`` the file's, placed on
    the nodes whose stacks pass through their lines; ``root`` the folder paths are
    shown relative to. Raises :class:`SchemaError` for bytes that cannot be read.
    """
    if not target.program:
        raise SchemaError(f"{target.name} has no program (the export {'failed' if target.status == 'error' else 'kept none'})")
    doc = decode_document(target.program)
    reader = _Reader(doc[S.P_STRINGS])
    files = _Files([path, *project_files], root)
    sig = target.signature
    names = sig.dim_names if sig is not None else {}
    # A picture is ~20 small objects per node (100,000 for a 70B decoder), none of them
    # garbage: the collector's passes over them meanwhile were a third of the time.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _build(target, doc, reader, files, sig, names, path, list(diagnostics))
    except SchemaError:
        raise
    except (AttributeError, KeyError, IndexError, TypeError, ValueError, ArithmeticError, RecursionError) as e:
        raise SchemaError(f"inconsistent program: {type(e).__name__}: {e}") from None
    finally:
        if collecting:
            gc.enable()


def _build(
    target: TargetResult,
    doc: dict[int, Any],
    r: _Reader,
    files: _Files,
    sig: Any,
    names: Mapping[str, str],
    path: str,
    diagnostics: list[Diagnostic],
) -> Picture:
    records = doc[S.P_GRAPH][S.G_NODES]
    node_names = [r.s(rec[S.N_NAME]) for rec in records]
    # Diagnostics by (real file, line), of this target or of none.
    at: dict[tuple[str, int], list[Diagnostic]] = {}
    for d in diagnostics:
        if d.target is not None and d.target != target.name:
            continue
        at.setdefault((files.real(d.path or path), d.line), []).append(d)
    at_files = {f for f, _ in at}
    inputs = {s.arg.name: s for s in sig.inputs} if sig is not None else {}
    written: dict[str, str] = {}  # output value node -> "buffer steps" / "input x"
    mutated_targets: dict[str, str] = {}  # buffer target or input name -> its kind
    if sig is not None:
        for out in sig.outputs:
            if out.kind in ("BUFFER_MUTATION", "USER_INPUT_MUTATION", "PARAMETER_MUTATION") and out.target:
                what = {"BUFFER_MUTATION": "buffer", "USER_INPUT_MUTATION": "input", "PARAMETER_MUTATION": "parameter"}[out.kind]
                written[out.arg.name] = f"{what} {out.target}"
                mutated_targets[out.target] = what
    nodes: list[dict[str, Any]] = []
    results: dict[str, dict[str, Any]] = {}
    sources: dict[str, NodeSource] = {}
    made: dict[tuple[str, int], list[str]] = {}
    metas: list[tuple[TensorMeta | None, ...]] = []
    namespaces: dict[tuple[Any, ...], str] = {}
    shapes: dict[TensorMeta, str] = {}
    for i, rec in enumerate(records):
        op_code = rec[S.N_OP]
        if type(op_code) is not int or not 0 <= op_code < len(S.OP_NAMES):
            raise SchemaError(f"unknown node op {op_code!r}")
        op = S.OP_NAMES[op_code]
        name = node_names[i]
        tgt = r.s(rec[S.N_TARGET]) if rec[S.N_TARGET] is not None and op != "placeholder" else ""
        meta = r.tensor_metas(rec[S.N_VAL]) if op != "output" else ()
        metas.append(meta)
        m = rec[S.N_META] or []
        stack = m[S.M_MODULE_STACK] if len(m) > S.M_MODULE_STACK and m[S.M_MODULE_STACK] else ()
        if op == "placeholder":
            namespace = "inputs"
        else:
            # The same stack recurs on every node of a module call: by its string ids, once.
            key = tuple(sid for _k, p, c in stack for sid in (p, c))
            namespace = namespaces.get(key)  # type: ignore[assignment]
            if namespace is None:
                namespace = namespaces[key] = _namespace([(r.s(p), r.s(c)) for _k, p, c in stack])
        found: list[int] = []
        seen: set[int] = set()
        for a in rec[S.N_ARGS]:
            _inputs(a, found, seen)
        for _k, a in rec[S.N_KWARGS]:
            _inputs(a, found, seen)
        getitem = op == "call_function" and tgt.startswith(_BUILTIN_MODULES) and tgt.endswith("getitem")
        edges = []
        for j, src in enumerate(found):
            out_id = "0"
            if getitem and j == 0 and len(rec[S.N_ARGS]) > 1 and type(rec[S.N_ARGS][1]) is int and len(metas[src]) > 1:
                out_id = str(rec[S.N_ARGS][1])
            edges.append({"sourceNodeId": node_names[src], "sourceNodeOutputId": out_id, "targetNodeInputId": str(j)})
        attrs: list[dict[str, str]] = []
        if op == "call_function":
            attrs.append({"key": "op", "value": tgt.removeprefix("torch.ops.")})
            args = [r.arg_text(a, node_names) for a in rec[S.N_ARGS]]
            args += [f"{r.s(k)}={r.arg_text(v, node_names)}" for k, v in rec[S.N_KWARGS]]
            if args:
                attrs.append({"key": "args", "value": ", ".join(args)})
        # The node's frames, outermost first.
        sid = m[S.M_STACK] if len(m) > S.M_STACK else None
        frames = r.frames(sid) if sid is not None else ()
        source: NodeSource | None = None
        categories: list[str] = []
        notes: list[str] = []
        if op == "placeholder" and name in inputs:
            spec = inputs[name]
            attrs.append({"key": "input", "value": spec.kind + (f" {spec.target}" if spec.target else "")})
            if spec.source is not None and spec.source.line >= 1:
                source = NodeSource(files.real(spec.source.path or path), spec.source.line)
            kind = mutated_targets.get(spec.target or "") if spec.kind != "USER_INPUT" else mutated_targets.get(name)
            if kind is not None:
                attrs.append({"key": "mutated", "value": f"the program writes this {kind}"})
                categories.append("mutation")
        elif op == "output" and sig is not None:
            attrs.append({"key": "output", "value": ", ".join(o.kind + (f" {o.target}" if o.target else "") for o in sig.outputs)})
            user = next((o for o in sig.outputs if o.kind == "USER_OUTPUT" and o.source is not None), None)
            if user is not None and user.source is not None and user.source.line >= 1:
                source = NodeSource(files.real(user.source.path or path), user.source.line)
        else:
            for frame in reversed(frames):
                real = files.real(frame.file)
                if real in files.project:
                    source = NodeSource(real, frame.line)
                    break
        if name in written:
            attrs.append({"key": "mutates", "value": written[name]})
            categories.append("mutation")
        if source is not None:
            attrs.append({"key": "source", "value": files.line(source.file, source.line)})
            sources[name] = source
        lines = {(real, f.line) for f in frames if (real := files.real(f.file)) in files.project}
        if source is not None:
            lines.add((source.file, source.line))
        for place in lines:
            made.setdefault(place, []).append(name)
        if at:
            places = {(files.real(f.file), f.line) for f in frames if files.real(f.file) in at_files}
            if source is not None:
                places.add((source.file, source.line))
            for place in sorted(places):
                for d in at.get(place, ()):
                    notes.append(f"{d.code}: {d.message.splitlines()[0] if d.message else ''}")
                    categories.append("portable" if d.code == "lowering/executorch-not-delegated" else d.severity)
        if notes:
            attrs.append({"key": "diagnostics", "value": "\n".join(dict.fromkeys(notes))})
        ranked = sorted((c for c in categories if c in _RANK), key=_RANK.__getitem__)
        if ranked:
            results[name] = {"value": ranked[0], "bgColor": _COLOURS[ranked[0]]}
        outputs = []
        for k, t in enumerate(meta):
            if t is not None:
                shape = shapes.get(t)
                if shape is None:
                    shape = shapes[t] = _shape(t, names)
                outputs.append({"id": str(k), "attrs": [{"key": "tensor_shape", "value": shape}]})
        nodes.append(
            {
                "id": name,
                "label": _label(op, name, tgt),
                "namespace": namespace,
                "attrs": attrs,
                "incomingEdges": edges,
                "outputsMetadata": outputs,
            }
        )
    graphs = {"graphs": [{"id": GRAPH_ID, "nodes": nodes}]}
    node_data = {"name": "exportlens", "results": results, "showLabelCountColumnsInChildrenStatsTable": True}
    return Picture(target.name, graphs, node_data, sources, made)


def pictures(result: FileResult, *, state_path: str | None = None, root: str | None = None, target: str | None = None) -> list[Picture]:
    """The picture of each exported target of ``result`` (or of the one named)."""
    path = state_path or result.path
    out = []
    for t in result.targets:
        if target is not None and t.name != target:
            continue
        if not t.program:
            continue
        out.append(
            picture(t, path=path, project_files=[result.path, *result.local_imports], diagnostics=result.diagnostics, root=root)
        )
    return out
