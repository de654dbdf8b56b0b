"""Where each spec of an exported signature comes from in the model file.

* ``USER_INPUT``: the ``forward`` parameter the flattened input leaf was bound to;
* ``PARAMETER``/``BUFFER``/``CONSTANT_TENSOR``/``CUSTOM_OBJ``: the deepest
  ``self.x = ...``/``register_buffer("x", ...)`` along the dotted target;
* ``*_MUTATION`` outputs: the in-place call, from the producing node's stack trace;
* ``USER_OUTPUT``: the ``return`` of ``forward`` that produced it.

Best effort by design: ``None`` when nothing in the file fits, never an exception.
Runs in the export worker (imports torch).
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch.utils import _pytree as pytree

from exportlens.core.model.signature import SourceLine
from exportlens.core.source.frames import frames_in_text
from exportlens.core.source.project import UserSources
from exportlens.core.source.sourcemap import ClassInfo, FunctionInfo, SourceIndex, param_for_placeholder
from exportlens.core.source.spans import statement_at

_STATE_INPUT_KINDS = {"PARAMETER", "BUFFER", "CONSTANT_TENSOR", "CUSTOM_OBJ"}
_MUTATION_OUTPUT_KINDS = {"BUFFER_MUTATION", "USER_INPUT_MUTATION", "PARAMETER_MUTATION"}
# How far to walk back through a node's inputs looking for a stack trace.
_MAX_TRACE_HOPS = 4


# -- shared state -------------------------------------------------------------------


class SourceContext:
    """What every source lookup needs: the graph's nodes and the file's index."""

    def __init__(self, ep: torch.export.ExportedProgram, module: torch.nn.Module, index: SourceIndex, sources: UserSources | None = None) -> None:
        self.ep = ep
        self.module = module
        self.index = index
        self.path = _realpath(index.path)
        # The local modules the model's classes live in are searched as the file is.
        self.sources = sources or UserSources(index, None)
        self.placeholders: dict[str, torch.fx.Node] = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
        self.nodes: dict[str, torch.fx.Node] = {n.name: n for n in ep.graph.nodes}
        self._class_cache: dict[type, ClassInfo | None] = {}

    def class_info(self, cls: type) -> ClassInfo | None:
        """The index entry of ``cls`` when it is defined in the model file."""
        if cls not in self._class_cache:
            self._class_cache[cls] = self._find_class(cls)
        return self._class_cache[cls]

    def _find_class(self, cls: type) -> ClassInfo | None:
        try:
            source = inspect.getsourcefile(cls)
        except (TypeError, OSError):
            return None
        if source is None or not self.sources.is_user(source):
            return None
        # Classes defined inside functions: "make.<locals>.Net" is "make.Net" in the index.
        qualname = getattr(cls, "__qualname__", cls.__name__).replace(".<locals>", "")
        return self.sources.index(source).classes.get(qualname)

    def in_file(self, filename: str) -> bool:
        """One of the user's files: the declaring file or a local module."""
        return self.sources.is_user(filename)

    def forward_info(self) -> FunctionInfo | None:
        """The ``forward`` the root module runs, when its class is in the file."""
        owner = _defining_class(type(self.module), "forward")
        info = self.class_info(owner) if owner is not None else None
        return info.methods.get("forward") if info is not None else None


def _realpath(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


def _defining_class(cls: type, attr: str) -> type | None:
    """The class of ``cls``'s MRO whose body defines ``attr``."""
    for klass in cls.__mro__:
        if attr in vars(klass):
            return klass
    return None


# -- kinds, arguments, metadata -----------------------------------------------------


def _kind_name(kind: Any) -> str:
    name = getattr(kind, "name", None)
    return name if isinstance(name, str) else str(kind)


def _arg_name(arg: Any) -> str:
    name = getattr(arg, "name", "")
    return name if isinstance(name, str) else str(name)


def _user_input_sources(ctx: SourceContext, specs: list[Any], args: tuple, kwargs: dict) -> dict[int, SourceLine]:
    """Spec index -> line of the ``forward`` parameter each user input was bound to."""
    forward = ctx.forward_info()
    if forward is None:
        return {}
    user = [i for i, s in enumerate(specs) if _kind_name(s.kind) == "USER_INPUT"]
    params = _leaf_params(ctx.ep, ctx.module, args, kwargs)
    if params is None or len(params) != len(user):
        # Our flattening disagrees with torch's in_spec (inputs torch normalised
        # differently): fall back to the placeholder names torch derived from params.
        params = [param_for_placeholder(_arg_name(specs[i].arg), list(forward.params)[1:]) for i in user]
    out: dict[int, SourceLine] = {}
    for i, param in zip(user, params, strict=True):
        if param is not None and param in forward.params:
            out[i] = forward.params[param]
    return out


def _leaf_params(
    ep: torch.export.ExportedProgram, module: torch.nn.Module, args: tuple, kwargs: dict
) -> list[str | None] | None:
    """The ``forward`` parameter name behind each pytree leaf of ``(args, kwargs)``.

    None unless our flattening has exactly the structure torch recorded as the
    program's ``in_spec`` (so leaf i really is the i-th ``USER_INPUT``).
    """
    try:
        leaves, spec = pytree.tree_flatten_with_path((tuple(args), dict(kwargs)))
        in_spec = getattr(getattr(ep, "call_spec", None), "in_spec", None)
        if in_spec is not None and spec != in_spec:
            return None
        sig = _forward_signature(module)
    except Exception:
        return None
    return [_param_for_path(path, sig) for path, _ in leaves]


def _forward_signature(module: torch.nn.Module) -> inspect.Signature:
    """``forward``'s signature without ``self`` (the bound method's, i.e. after wrappers)."""
    try:
        return inspect.signature(module.forward)
    except (TypeError, ValueError):
        params = list(inspect.signature(type(module).forward).parameters.values())[1:]
        return inspect.Signature(params)


def _param_for_path(path: tuple, sig: inspect.Signature) -> str | None:
    """Bind one leaf's top-level position/key the way Python binds the call."""
    if len(path) < 2:
        return None
    top, key = getattr(path[0], "idx", None), path[1]
    params = list(sig.parameters.values())
    if top == 0:  # positional argument number key.idx
        pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        idx = getattr(key, "idx", None)
        if not isinstance(idx, int):
            return None
        if idx < len(pos):
            return pos[idx].name
        return next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
    if top == 1:  # keyword argument key.key
        name = getattr(key, "key", None)
        named = {p.name: p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if isinstance(name, str) and name in named:
            return name
        return next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
    return None


# -- PARAMETER / BUFFER / CONSTANT_TENSOR / CUSTOM_OBJ -> attribute definition ----------


def _input_source(ctx: SourceContext, spec: Any) -> SourceLine | None:
    if _kind_name(spec.kind) not in _STATE_INPUT_KINDS or not isinstance(spec.target, str):
        return None
    found = attribute_source(ctx, spec.target)
    if found is None:
        # Lifted objects get synthetic targets ("lifted_custom_0"); the object itself
        # is in ep.constants and still hangs off the module under its real name.
        path = _attribute_path_of(ctx.module, _constant(ctx.ep, spec.target))
        found = attribute_source(ctx, path) if path else None
    if found is None:
        found = _first_use_source(ctx, _arg_name(spec.arg))
    return found


def _first_use_source(ctx: SourceContext, placeholder: str) -> SourceLine | None:
    """Where a lifted value without an attribute (``torch.tensor(..)`` in forward) is used."""
    node = ctx.placeholders.get(placeholder)
    for user in node.users if node is not None else ():
        hit = _deepest_frame(ctx, user)
        if hit is not None:
            return statement_at(ctx.sources.index(hit[1]), hit[2])
    return None


def attribute_source(ctx: SourceContext, target: str) -> SourceLine | None:
    """The deepest definition line along ``a.b.c`` in classes defined in the file."""
    found: SourceLine | None = None
    obj: Any = ctx.module
    for part in target.split("."):
        if obj is None:
            break
        for klass in type(obj).__mro__:
            info = ctx.class_info(klass)
            if info is not None and part in info.attributes:
                found = info.attributes[part]
                break
        obj = _child(obj, part)
    return found


def _constant(ep: torch.export.ExportedProgram, target: str) -> Any:
    constants = getattr(ep, "constants", None) or {}
    return constants.get(target)


def _attribute_path_of(module: torch.nn.Module, obj: Any) -> str | None:
    """The dotted attribute path under which ``obj`` (by identity) hangs off the tree."""
    if obj is None:
        return None
    for prefix, sub in module.named_modules(remove_duplicate=False):
        for name, value in vars(sub).items():
            if value is obj and not name.startswith("_"):
                return f"{prefix}.{name}" if prefix else name
    return None


def _child(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name)
    except Exception:  # properties may raise; the walk just stops
        return None


# -- outputs ---------------------------------------------------------------------------


def _output_source(ctx: SourceContext, spec: Any, node: torch.fx.Node | None) -> SourceLine | None:
    kind = _kind_name(spec.kind)
    if kind in _MUTATION_OUTPUT_KINDS:
        return _mutation_source(ctx, spec, node)
    if kind == "USER_OUTPUT":
        return _return_source(ctx, node)
    return None


def _file_frames(ctx: SourceContext, node: torch.fx.Node) -> list[tuple[str, int]]:
    """``(file, line)`` of the node's stack-trace frames in the user's files, outermost first."""
    trace = node.meta.get("stack_trace")
    if not isinstance(trace, str):
        return []
    return [(file, line) for file, line, _ in frames_in_text(trace) if ctx.in_file(file)]


def _traced_nodes(ctx: SourceContext, node: torch.fx.Node | None) -> Iterator[torch.fx.Node]:
    """The node, then what it came from (``from_node``), then its inputs, breadth first.

    Decompositions and functionalization can leave the node an output points at
    without a stack trace (a ``copy``, an ``index_put``); its ancestors usually have one.
    """
    if node is None:
        return
    seen: set[str] = set()
    frontier = [node]
    for _ in range(_MAX_TRACE_HOPS):
        nxt: list[torch.fx.Node] = []
        for n in frontier:
            if n.name in seen:
                continue
            seen.add(n.name)
            yield n
            nxt.extend(_from_nodes(ctx, n))
            nxt.extend(x for x in n.all_input_nodes if x.op != "placeholder")
        frontier = nxt
        if not frontier:
            return


def _from_nodes(ctx: SourceContext, node: torch.fx.Node) -> Iterable[torch.fx.Node]:
    """Nodes of this graph named in ``meta["from_node"]`` provenance."""
    for source in node.meta.get("from_node") or []:
        for s in _provenance_chain(source):
            name = getattr(s, "name", None)
            if isinstance(name, str) and name in ctx.nodes and name != node.name:
                yield ctx.nodes[name]


def _provenance_chain(source: Any, depth: int = 0) -> Iterator[Any]:
    if depth > 8 or source is None:
        return
    yield source
    for parent in getattr(source, "from_node", None) or []:
        yield from _provenance_chain(parent, depth + 1)


def _deepest_frame(ctx: SourceContext, node: torch.fx.Node | None) -> tuple[torch.fx.Node, str, int] | None:
    for n in _traced_nodes(ctx, node):
        lines = _file_frames(ctx, n)
        if lines:
            return n, lines[-1][0], lines[-1][1]
    return None


def _mutation_source(ctx: SourceContext, spec: Any, node: torch.fx.Node | None) -> SourceLine | None:
    hit = _deepest_frame(ctx, node)
    if hit is not None:
        traced, file, line = hit
        index = ctx.sources.index(file)
        method = _inplace_method(traced)
        where = (method and index.inplace_call_at(line, method)) or index.inplace_call_at(line)
        return where or statement_at(index, line)
    # No trace: `self.b.copy_(x)` leaves the output pointing at the placeholder `x`.
    # Fall back to the text: the one in-place call on that name, or the one
    # `self.b = ...`/`self.b += ...` outside __init__.
    if not isinstance(spec.target, str):
        return None
    state = _kind_name(spec.kind) != "USER_INPUT_MUTATION"
    name = spec.target.rsplit(".", 1)[-1]
    candidates = _inplace_calls_on(ctx.index, name, on_self=state)
    if state:
        candidates += ctx.index.attribute_assignments(name)
    return candidates[0] if len(candidates) == 1 else None


def _inplace_calls_on(index: SourceIndex, name: str, *, on_self: bool) -> list[SourceLine]:
    """In-place method calls whose receiver is ``name`` (``self.name`` for state)."""
    prefix = r"\bself\." if on_self else r"(?<![\w.])"
    receiver = re.compile(rf"{prefix}{re.escape(name)}\s*\.\s*$")
    found: list[SourceLine] = []
    for line, calls in sorted(index.inplace_calls.items()):
        text = index.line_text(line)
        for method, where in calls:
            start = where.column - 1
            pos = text.find(f"{method}(", start)
            # The call's text up to `method(` must end in `<receiver>.`.
            if where.line == line and pos >= 0 and receiver.search(text[start:pos]):
                found.append(where)
    return found


def _inplace_method(node: torch.fx.Node) -> str | None:
    """``add_`` from ``meta["torch_fn"] == ("add__1", "method_descriptor.add_")``."""
    fn = node.meta.get("torch_fn")
    if isinstance(fn, tuple) and len(fn) == 2 and isinstance(fn[1], str):
        name = fn[1].rsplit(".", 1)[-1]
        if name.endswith("_") and not name.endswith("__"):
            return name
    return None


def _return_source(ctx: SourceContext, node: torch.fx.Node | None) -> SourceLine | None:
    forward = ctx.forward_info()
    returns = forward.returns if forward is not None else []
    frames = _all_file_frames(ctx, node)
    for file, line in reversed(frames):
        for ret in returns:
            if ret.line <= line <= (ret.end_line or ret.line) and ctx.sources.path_of(ret) == _realpath(file):
                return ret
    if len(returns) == 1:
        return returns[0]
    if frames:
        return statement_at(ctx.sources.index(frames[-1][0]), frames[-1][1])
    return None


def _all_file_frames(ctx: SourceContext, node: torch.fx.Node | None) -> list[tuple[str, int]]:
    """The frames of the first node (itself or an ancestor) that has any in the file."""
    for n in _traced_nodes(ctx, node):
        lines = _file_frames(ctx, n)
        if lines:
            return lines
    return []
