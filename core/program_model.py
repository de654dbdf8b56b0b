"""A torch-free, read-only model of a serialized program, for the server and CLI.

Why: the language server must show a program's signature, nodes, shapes and the
source line of every node without importing torch (seconds of start-up and hundreds
of MB). :func:`read_program` decodes the msgpack bytes with the pure-data schema
(:mod:`exportlens.core.schema`) and flattens them into the plain dataclasses below,
reusing :class:`exportlens.core.signature.Signature` so the signature text is the
one ``print(ep.graph_signature)`` shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from exportlens.core import codec, schema
from exportlens.core.signature import ArgSpec, InputSpec, OutputSpec, Signature, TensorMeta

__all__ = ["ProgramModel", "NodeModel", "SourceLocation", "read_program"]


@dataclass(frozen=True)
class SourceLocation:
    """The deepest frame of a node's ``stack_trace``: where the user's code made it."""

    file: str
    line: int
    function: str


@dataclass(frozen=True)
class NodeModel:
    name: str
    op: str  # "placeholder", "call_function" or "output"
    target: str  # "torch.ops.aten.add.Tensor"; "" for placeholders and the output
    args: tuple[str, ...]  # one short text per argument: "x", "[a, b]", "1", "dim=-1"
    meta: tuple[TensorMeta | None, ...]  # one per output (None: not a tensor)
    source: SourceLocation | None = None
    nn_module_stack: tuple[str, ...] = ()  # module paths, outermost first
    subgraphs: tuple[str, ...] = ()  # names of nested graphs (torch.cond branches, map bodies)


@dataclass(frozen=True)
class ProgramModel:
    signature: Signature
    nodes: tuple[NodeModel, ...]
    ranges: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    torch_version: str = ""
    has_weights: bool = False

    def source_lines(self) -> dict[str, SourceLocation]:
        """Node name -> source location, for the nodes that have one."""
        return {n.name: n.source for n in self.nodes if n.source is not None}


_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def parse_stack_trace(text: str | None) -> SourceLocation | None:
    """The last (deepest) ``File "...", line N, in f`` frame of a trace."""
    if not text:
        return None
    frames = _FRAME_RE.findall(text)
    if not frames:
        return None
    file, line, func = frames[-1]
    return SourceLocation(file=file, line=int(line), function=func)


_SREPR_SYMBOL = re.compile(r"Symbol\('(\w+)'[^)]*\)")
_SREPR_INTEGER = re.compile(r"Integer\((-?\d+)\)")


def expr_text(srepr: str) -> str:
    """torch stores expressions as ``sympy.srepr``; show ``s0`` for ``Symbol('s0', ...)``."""
    return _SREPR_INTEGER.sub(r"\1", _SREPR_SYMBOL.sub(r"\1", srepr))


def _tensor_meta(tm: schema.TensorMeta | None) -> TensorMeta | None:
    if tm is None:
        return None
    shape: list[int | str] = []
    for s in tm.sizes:
        shape.append(s.value if s.type == "as_int" else expr_text(s.value.expr_str))
    dev = tm.device.type if tm.device.index is None else f"{tm.device.type}:{tm.device.index}"
    return TensorMeta(dtype=schema.DTYPE_NAMES.get(tm.dtype, "unknown"), shape=tuple(shape), device=dev, requires_grad=tm.requires_grad)


def _arg_text(a: schema.Argument) -> str:
    t, v = a.type, a.value
    if t == "as_none":
        return "None"
    if t == "as_tensor":
        return str(v.name)
    if t == "as_tensors":
        return "[" + ", ".join(x.name for x in v) + "]"
    if t in ("as_sym_int", "as_sym_float", "as_sym_bool", "as_optional_tensor"):
        return "None" if v.type == "as_none" else str(v.value.name if v.type == "as_tensor" else v.value)
    if t in ("as_sym_ints", "as_sym_floats", "as_sym_bools", "as_optional_tensors"):
        parts = ["None" if x.type == "as_none" else str(x.value.name if x.type == "as_tensor" else x.value) for x in v]
        return "[" + ", ".join(parts) + "]"
    if t == "as_scalar_type":
        return "torch." + schema.DTYPE_NAMES.get(v, "unknown")
    if t in ("as_layout", "as_memory_format"):
        return str(v.name)
    if t == "as_device":
        return v.type if v.index is None else f"{v.type}:{v.index}"
    if t == "as_graph":
        return str(v.name)
    if t == "as_custom_obj":
        return str(v.name)
    if t == "as_complex":
        return repr(complex(v.real, v.imag))
    if t == "as_string_to_argument":
        return "{" + ", ".join(f"{k!r}: {_arg_text(x)}" for k, x in v.items()) + "}"
    if t == "as_nested_tensors":
        return "[" + ", ".join("[" + ", ".join(x.name for x in xs) + "]" for xs in v) + "]"
    return repr(v)


def _output_names(a: schema.Argument) -> list[str | None]:
    t, v = a.type, a.value
    if t == "as_tensor":
        return [v.name]
    if t == "as_tensors":
        return [x.name for x in v]
    if t in ("as_sym_int", "as_sym_float", "as_sym_bool") and v.type == "as_name":
        return [v.value]
    if t == "as_optional_tensors":
        return [x.value.name if x.type == "as_tensor" else None for x in v]
    return [None]


def _arg_spec(a: Any, g: schema.Graph) -> ArgSpec:
    """ArgSpec from a TensorArgument/TokenArgument/CustomObjArgument or an Argument union."""
    if isinstance(a, schema.TensorArgument):
        return ArgSpec("tensor", a.name, meta=_tensor_meta(g.tensor_values.get(a.name)))
    if isinstance(a, schema.TokenArgument):
        return ArgSpec("token", a.name)
    if isinstance(a, schema.CustomObjArgument):
        return ArgSpec("custom_obj", a.name, class_fqn=a.class_fqn)
    t, v = a.type, a.value
    if t in ("as_tensor", "as_custom_obj"):
        return _arg_spec(v, g)
    for kind in ("sym_int", "sym_float", "sym_bool"):
        if t == f"as_{kind}":
            if v.type == "as_name":
                return ArgSpec(kind.replace("_", ""), v.value, value=v.value)
            return ArgSpec("constant", "", value=v.value)
    if t == "as_none":
        return ArgSpec("constant", "", value=None)
    if t in ("as_int", "as_float", "as_string", "as_bool"):
        return ArgSpec("constant", "", value=v)
    return ArgSpec(t.removeprefix("as_"), "")


_IN_KIND = {
    "user_input": "USER_INPUT", "parameter": "PARAMETER", "buffer": "BUFFER",
    "tensor_constant": "CONSTANT_TENSOR", "custom_obj": "CUSTOM_OBJ", "token": "TOKEN",
    "constant_input": "USER_INPUT",
}  # fmt: skip
_OUT_KIND = {
    "user_output": "USER_OUTPUT", "loss_output": "LOSS_OUTPUT", "buffer_mutation": "BUFFER_MUTATION",
    "gradient_to_parameter": "GRADIENT_TO_PARAMETER", "gradient_to_user_input": "GRADIENT_TO_USER_INPUT",
    "user_input_mutation": "USER_INPUT_MUTATION", "token": "TOKEN", "parameter_mutation": "PARAMETER_MUTATION",
}  # fmt: skip
_TARGET_FIELDS = ("parameter_name", "buffer_name", "tensor_constant_name", "custom_obj_name", "user_input_name")


def _target(v: Any) -> str | None:
    for f in _TARGET_FIELDS:
        if hasattr(v, f):
            return str(getattr(v, f))
    return None


def _signature(sig: schema.GraphSignature, g: schema.Graph, ranges: dict) -> Signature:
    ins = []
    for s in sig.input_specs:
        v = s.value
        if s.type == "constant_input":
            arg = ArgSpec("constant", v.name, value=v.value.value)
        else:
            arg = _arg_spec(v.arg, g)
        persistent = v.persistent if s.type == "buffer" else None
        ins.append(InputSpec(kind=_IN_KIND[s.type], arg=arg, target=_target(v), persistent=persistent))
    outs = [OutputSpec(kind=_OUT_KIND[s.type], arg=_arg_spec(s.value.arg, g), target=_target(s.value)) for s in sig.output_specs]
    return Signature(inputs=tuple(ins), outputs=tuple(outs), ranges=ranges)


def _nodes(g: schema.Graph, prefix: str = "") -> list[NodeModel]:
    out: list[NodeModel] = []
    for a in g.inputs:
        names = _output_names(a)
        name = names[0] or ""
        out.append(NodeModel(prefix + name, "placeholder", "", (), (_tensor_meta(g.tensor_values.get(name)),)))
    for i, n in enumerate(g.nodes):
        names = [x for o in n.outputs for x in _output_names(o)]
        args = tuple(f"{na.name}={_arg_text(na.arg)}" for na in n.inputs)
        subs = [na.arg.value for na in n.inputs if na.arg.type == "as_graph"]
        stack = n.metadata.get("nn_module_stack", "")
        paths = tuple(item.split(",")[1] for item in stack.split(";") if item.count(",") >= 2) if stack else ()
        name = n.name or next((x for x in names if x), f"node{i}")
        out.append(
            NodeModel(
                name=prefix + name,
                op="call_function",
                target=n.target,
                args=args,
                meta=tuple(_tensor_meta(g.tensor_values.get(x)) if x else None for x in names),
                source=parse_stack_trace(n.metadata.get("stack_trace")),
                nn_module_stack=paths,
                subgraphs=tuple(s.name for s in subs),
            )
        )
        for s in subs:
            out.extend(_nodes(s.graph, prefix=f"{prefix}{s.name}."))
    out.append(NodeModel(prefix + "output", "output", "", tuple(_arg_text(a) for a in g.outputs), ()))
    return out


def read_program(data: bytes | bytearray | memoryview) -> ProgramModel:
    """Bytes from ``exportlens.dumps`` -> :class:`ProgramModel`, without torch.

    Raises :class:`exportlens.core.codec.SchemaError` for anything malformed.
    """
    doc = codec.decode(schema.Program, data, schema.SCHEMA_VERSION)
    p = doc.program
    if p.schema_version.major != schema.TORCH_SCHEMA_MAJOR:
        raise codec.SchemaError(f"torch graph schema major {p.schema_version.major} is not {schema.TORCH_SCHEMA_MAJOR}")
    try:
        ranges = {k: (r.min_val, r.max_val) for k, r in sorted(p.range_constraints.items())}
        g = p.graph_module.graph
        return ProgramModel(
            signature=_signature(p.graph_module.signature, g, ranges),
            nodes=tuple(_nodes(g)),
            ranges=ranges,
            torch_version=p.torch_version,
            has_weights=doc.weights is not None,
        )
    except (AttributeError, KeyError, TypeError, ValueError, RecursionError) as e:
        raise codec.SchemaError(f"inconsistent program: {type(e).__name__}: {e}") from None
