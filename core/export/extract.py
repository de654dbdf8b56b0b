"""Torch side of the signature: a real ``ExportedProgram`` -> :class:`Signature`.

Runs inside the export worker (it imports torch). It copies torch's functional
``ExportGraphSignature`` spec for spec (kinds, argument names, targets, order,
``persistent``), adds tensor metadata from the graph's placeholder/output nodes and
the symbol ranges, and attaches to every spec the line of the model file it comes
from (``exportlens.core.export.specsource``).

Everything is best effort: odd metadata, unknown argument classes or kinds give
``None`` fields, never an exception, because a signature with a missing line is
still far more useful than no signature.
"""

from __future__ import annotations

from typing import Any

import torch

from exportlens.core.export.specsource import (
    SourceContext,
    _arg_name,
    _input_source,
    _kind_name,
    _output_source,
    _user_input_sources,
)
from exportlens.core.model.signature import (
    ArgSpec,
    InputSpec,
    OutputSpec,
    Signature,
    TensorMeta,
)
from exportlens.core.serde.encode import range_bound
from exportlens.core.source.project import UserSources
from exportlens.core.source.sourcemap import SourceIndex

__all__ = ["dim_names", "extract_signature", "graph_text"]

_ARG_KINDS: dict[str, str] = {
    "TensorArgument": "tensor",
    "SymIntArgument": "symint",
    "SymFloatArgument": "symfloat",
    "SymBoolArgument": "symbool",
    "ConstantArgument": "constant",
    "CustomObjArgument": "custom_obj",
    "TokenArgument": "token",
}


def graph_text(ep: torch.export.ExportedProgram) -> str:
    """The graph module's readable code, as ``print(ep.graph_module)`` would, uncoloured."""
    return str(ep.graph_module.print_readable(print_output=False, colored=False))


def extract_signature(
    ep: torch.export.ExportedProgram,
    module: torch.nn.Module,
    *,
    index: SourceIndex,
    args: tuple,
    kwargs: dict | None,
    sources: UserSources | None = None,
) -> Signature:
    """The torch-free signature of ``ep`` with tensor metadata and source lines
    (in the declaring file or, with ``sources``, the local module the code is in)."""
    ctx = SourceContext(ep, module, index, sources)
    sig = ep.graph_signature
    user_sources = _user_input_sources(ctx, sig.input_specs, args, kwargs or {})
    inputs: list[InputSpec] = []
    for i, spec in enumerate(sig.input_specs):
        inputs.append(
            InputSpec(
                kind=_kind_name(spec.kind),
                arg=_arg_spec(spec.arg, ctx.placeholders.get(_arg_name(spec.arg))),
                target=spec.target,
                persistent=getattr(spec, "persistent", None),
                source=user_sources.get(i) or _input_source(ctx, spec),
            )
        )
    produced = _output_values(ep, len(sig.output_specs))
    outputs: list[OutputSpec] = []
    for spec, value in zip(sig.output_specs, produced, strict=True):
        node = value if isinstance(value, torch.fx.Node) else None
        outputs.append(
            OutputSpec(
                kind=_kind_name(spec.kind),
                arg=_arg_spec(spec.arg, node),
                target=spec.target,
                source=_output_source(ctx, spec, node),
            )
        )
    return Signature(tuple(inputs), tuple(outputs), _ranges(ep), dim_names(ep))


def _arg_spec(arg: Any, node: torch.fx.Node | None) -> ArgSpec:
    kind = _ARG_KINDS.get(type(arg).__name__, type(arg).__name__.lower())
    name = _arg_name(arg)
    val = node.meta.get("val") if node is not None else None
    if kind == "constant":
        return ArgSpec(kind, name, value=_plain(getattr(arg, "value", None)))
    if kind == "custom_obj":
        fqn = getattr(arg, "class_fqn", None)
        return ArgSpec(kind, name, class_fqn=fqn if isinstance(fqn, str) else None)
    if kind in ("symint", "symfloat", "symbool"):
        return ArgSpec(kind, name, value=_sym_text(val))
    if kind == "tensor":
        return ArgSpec(kind, name, meta=tensor_meta(val))
    return ArgSpec(kind, name)


def _plain(value: Any) -> Any:
    """Constants the JSON contract can carry as they are; anything else as its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _sym_text(val: Any) -> str | None:
    """``"s0"`` for a symbolic scalar; its value as text when it is concrete."""
    if val is None:
        return None
    node = getattr(val, "node", None)
    expr = getattr(node, "expr", None)
    return str(expr if expr is not None else val)


def _dim(d: Any) -> int | str:
    if isinstance(d, int):
        return d
    expr = getattr(getattr(d, "node", None), "expr", None)
    if expr is not None and getattr(expr, "is_number", False):
        try:
            return int(expr)
        except (TypeError, ValueError):
            pass
    return str(expr if expr is not None else d)


def tensor_meta(val: Any) -> TensorMeta | None:
    """Dtype, shape, device and ``requires_grad`` of a (fake) tensor; None otherwise."""
    if not isinstance(val, torch.Tensor):
        return None
    try:
        return TensorMeta(
            dtype=str(val.dtype).removeprefix("torch."),
            shape=tuple(_dim(d) for d in val.shape),
            device=str(val.device),
            requires_grad=bool(val.requires_grad),
        )
    except Exception:  # exotic subclasses can raise on any of these; metadata is optional
        return None


def _ranges(ep: torch.export.ExportedProgram) -> dict[str, tuple[int | None, int | None]]:
    out: dict[str, tuple[int | None, int | None]] = {}
    for sym, vr in (getattr(ep, "range_constraints", None) or {}).items():
        out[str(sym)] = (range_bound(getattr(vr, "lower", None), lower=True), range_bound(getattr(vr, "upper", None), lower=False))
    return out


def dim_names(ep: torch.export.ExportedProgram) -> dict[str, str]:
    """Each range symbol's ``Dim`` name as the user declared it (``{"s77": "batch"}``).

    Read from torch's own record rather than by matching ``dynamic_shapes`` to the
    inputs again: the shape environment keeps, for each dimension a ``Dim`` named,
    its source (``L['x'].size()[0]``, or ``L['flat_args'][0]...`` in strict mode)
    and that name, and the root of a derived ``Dim`` (``2 * w + 1``) as a source
    named after the root itself. Symbols of ``Dim.AUTO``/``Dim.DYNAMIC`` dims have
    no name; a name two symbols claim names neither (it would make two dims one in
    the snapshot). Private torch state, so best effort: anything odd gives ``{}``."""
    try:
        shape_env = _shape_env(ep)
        if shape_env is None:
            return {}
        debug: dict[str, str] = dict(getattr(shape_env, "source_name_to_debug_name", None) or {})
        sources: dict[Any, list[Any]] = dict(getattr(shape_env, "var_to_sources", None) or {})
        found: dict[str, str] = {}
        for symbol in getattr(ep, "range_constraints", None) or {}:
            if not getattr(symbol, "is_Symbol", False):
                continue  # a derived expression: named through its root
            names = {n for n in (_source_dim_name(s, debug) for s in sources.get(symbol, ())) if n}
            if len(names) == 1:
                found[str(symbol)] = names.pop()
        claimed: dict[str, int] = {}
        for name in found.values():
            claimed[name] = claimed.get(name, 0) + 1
        return {symbol: name for symbol, name in found.items() if claimed[name] == 1}
    except Exception:  # noqa: BLE001 - names are a nicety: the symbols still work
        return {}


def _shape_env(ep: torch.export.ExportedProgram) -> Any:
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            env = getattr(getattr(node.meta.get("val"), "fake_mode", None), "shape_env", None)
            if env is not None:
                return env
    return None


def _source_dim_name(source: Any, debug: dict[str, str]) -> str | None:
    name = getattr(source, "name", None)
    name = name() if callable(name) else name
    if not isinstance(name, str):
        return None
    if name in debug:
        return str(debug[name])
    # The root of a derived Dim has no tensor of its own: torch names its source after it.
    if type(source).__name__ == "ConstantSource" and name.isidentifier():
        return name
    return None


def _output_values(ep: torch.export.ExportedProgram, count: int) -> list[Any]:
    """The output node's arguments, one per output spec (None where unknown)."""
    outs = [n for n in ep.graph.nodes if n.op == "output"]
    values: list[Any] = []
    if outs and outs[-1].args:
        first = outs[-1].args[0]
        values = list(first) if isinstance(first, (tuple, list)) else [first]
    if len(values) != count:  # do not guess a pairing that may be off by one
        by_name = {n.name: n for n in ep.graph.nodes}
        return [by_name.get(_arg_name(s.arg)) for s in ep.graph_signature.output_specs]
    return values
