"""Torch side: ``torch.export.ExportedProgram`` <-> exportlens program bytes.

Route: the graph itself (nodes, arguments, tensor metadata, symbolic shapes,
higher-order subgraphs, graph signature, module call graph, range constraints) is
turned into torch's own schema dataclasses by torch's ``ExportedProgramSerializer``
and rebuilt by ``ExportedProgramDeserializer`` (which recreates ``meta["val"]`` fake
tensors in a ``FakeTensorMode`` with a ``ShapeEnv``). What this module owns is
everything around that: the msgpack encoding of torch's schema objects by field id
(:mod:`exportlens.core.codec`), the envelope and its version, weights as raw bytes
(never pickle; torch's serializer would pickle them), and — because torch's
deserializer resolves names with ``getattr`` on ``torch`` and parses symbolic
expressions with ``sympy.sympify`` (``eval``) — a validation pass that refuses any
operator outside ``torch.ops`` and a small allow-list, and any expression that is
not plain arithmetic on symbols, *before* torch sees the data.
"""

from __future__ import annotations

import dataclasses
import operator
import re
import sys
from collections.abc import Iterator
from typing import Annotated, Any

import torch
from torch._export.serde import schema as tschema
from torch._export.serde import serialize as tserde

from exportlens.core import codec, schema
from exportlens.core.codec import SchemaError

__all__ = ["to_bytes", "from_bytes", "collect_weights", "program_tree"]

# -- encode ------------------------------------------------------------------------


def program_tree(ep: torch.export.ExportedProgram) -> tschema.ExportedProgram:
    """torch's schema object for ``ep`` (graph only: no state, nothing pickled)."""
    with tserde._enable_graph_inputs_of_type_nn_module(ep.example_inputs):
        sp = tserde.ExportedProgramSerializer().serialize(
            ep, serialize_state_dict=False, serialize_constants=False, serialize_example_inputs=False
        )
    prog = sp.exported_program
    for o in _walk(prog):
        if isinstance(o, tschema.Node):
            # Provenance with object ids (``graph_id``): neither stable nor needed.
            o.metadata.pop("from_node", None)
            # fx's per-process codegen counter ("<eval_with_key>.97") is not stable either.
            if "stack_trace" in o.metadata:
                o.metadata["stack_trace"] = _EVAL_KEY.sub("<eval_with_key>", o.metadata["stack_trace"])
    return prog


_EVAL_KEY = re.compile(r"<eval_with_key>\.\d+")


def _tensor_data(name: str, t: torch.Tensor) -> schema.TensorData:
    if t.layout != torch.strided or t.is_quantized or type(t) not in (torch.Tensor, torch.nn.Parameter):
        raise ValueError(f"weight {name!r}: only plain strided tensors can be stored without pickle")
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    raw = flat.view(torch.uint8) if flat.numel() else flat.new_empty(0, dtype=torch.uint8)
    data = raw.numpy().tobytes()
    if sys.byteorder != "little" and t.element_size() > 1:  # pragma: no cover - big-endian hosts
        data = _byteswap(data, t.element_size())
    return schema.TensorData(
        name=name,
        dtype=str(t.dtype).removeprefix("torch."),
        shape=list(t.shape),
        data=data,
        requires_grad=bool(t.requires_grad),
    )


def _byteswap(data: bytes, width: int) -> bytes:  # pragma: no cover - big-endian hosts
    return b"".join(data[i : i + width][::-1] for i in range(0, len(data), width))


def collect_weights(ep: torch.export.ExportedProgram) -> schema.Weights:
    params = set(ep.graph_signature.parameters)
    weights = schema.Weights()
    for name in sorted(ep.state_dict):
        t = ep.state_dict[name]
        (weights.parameters if name in params else weights.buffers).append(_tensor_data(name, t))
    for name in sorted(ep.constants):
        c = ep.constants[name]
        if not isinstance(c, torch.Tensor):
            raise ValueError(
                f"constant {name!r} is a {type(c).__name__}; custom objects are not stored "
                "(that would need pickle): dump without weights and pass weights= to loads"
            )
        weights.constants.append(_tensor_data(name, c))
    return weights


def to_bytes(ep: torch.export.ExportedProgram, *, weights: bool = False) -> bytes:
    doc = schema.Program(
        version=list(schema.SCHEMA_VERSION),
        program=program_tree(ep),  # type: ignore[arg-type]  # torch's class, same field ids
        weights=collect_weights(ep) if weights else None,
    )
    return codec.encode(doc)


# -- decode ------------------------------------------------------------------------


@dataclasses.dataclass
class _TorchProgram:
    """The envelope with torch's graph classes: same field ids as ``schema.Program``."""

    version: Annotated[list[int], 1]
    program: Annotated[tschema.ExportedProgram, 2]
    weights: Annotated[schema.Weights | None, 3] = None


def _decode(data: bytes) -> _TorchProgram:
    tree = codec.unpack(data)
    codec.check_version(tree, schema.SCHEMA_VERSION)
    doc = codec.from_tree(_TorchProgram, tree)
    v = doc.program.schema_version
    if v.major != tschema.SCHEMA_VERSION[0]:
        raise SchemaError(
            f"torch graph schema version {v.major}.{v.minor} is not readable by torch "
            f"{torch.__version__} (schema {tschema.SCHEMA_VERSION[0]}.{tschema.SCHEMA_VERSION[1]})"
        )
    _validate(doc.program)
    return doc


def _tensor(td: schema.TensorData) -> torch.Tensor:
    dtype = getattr(torch, td.dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise SchemaError(f"weight {td.name!r}: unknown dtype {td.dtype!r}")
    numel = 1
    for d in td.shape:
        if d < 0:
            raise SchemaError(f"weight {td.name!r}: negative dimension in {td.shape}")
        numel *= d
    itemsize = torch.empty((), dtype=dtype).element_size()
    if numel * itemsize != len(td.data):
        raise SchemaError(f"weight {td.name!r}: {len(td.data)} bytes for {td.dtype}{td.shape}")
    if numel == 0:
        t = torch.empty(td.shape, dtype=dtype)
    else:
        t = torch.frombuffer(bytearray(td.data), dtype=torch.uint8).view(dtype).reshape(td.shape)
    return t.requires_grad_(td.requires_grad) if td.requires_grad else t


def _weights_from_arg(weights: Any) -> dict[str, Any]:
    if isinstance(weights, torch.export.ExportedProgram):
        return {**weights.state_dict, **weights.constants}
    if isinstance(weights, torch.nn.Module):
        named: dict[str, Any] = dict(weights.named_parameters(remove_duplicate=False))
        named.update(weights.named_buffers(remove_duplicate=False))
        return named
    if isinstance(weights, dict):
        return dict(weights)
    raise TypeError(f"weights must be a dict, an ExportedProgram or an nn.Module, not {type(weights).__name__}")


def _lookup(module: Any, name: str) -> Any:
    obj = module
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _split_state(sig: tschema.GraphSignature, pool: dict[str, Any], module: Any) -> tuple[dict, dict]:
    """Which names go to ``state_dict`` and which to ``constants``, as torch keeps them."""
    state: dict[str, Any] = {}
    consts: dict[str, Any] = {}
    missing = []
    for spec in sig.input_specs:
        kind, v = spec.type, spec.value
        if kind == "parameter":
            name, dest = v.parameter_name, state
        elif kind == "buffer":
            name, dest = v.buffer_name, (state if v.persistent else consts)
        elif kind == "tensor_constant":
            name, dest = v.tensor_constant_name, consts
        elif kind == "custom_obj":
            name, dest = v.custom_obj_name, consts
        else:
            continue
        value = pool.get(name)
        if value is None and module is not None:
            value = _lookup(module, name)
        if value is None:
            missing.append(name)
            continue
        if kind == "parameter" and not isinstance(value, torch.nn.Parameter):
            value = torch.nn.Parameter(value, requires_grad=value.requires_grad)
        dest[name] = value
    if missing:
        raise ValueError(f"weights missing for {', '.join(missing)}: pass weights= (dict, ExportedProgram or module)")
    return state, consts


def from_bytes(data: bytes, *, weights: Any = None) -> torch.export.ExportedProgram:
    doc = _decode(data)
    pool: dict[str, Any] = {}
    if doc.weights is not None:
        for td in doc.weights.parameters + doc.weights.buffers + doc.weights.constants:
            pool[td.name] = _tensor(td)
    module = weights if isinstance(weights, torch.nn.Module) else None
    if weights is not None:
        pool.update(_weights_from_arg(weights))
    state, consts = _split_state(doc.program.graph_module.signature, pool, module)
    return tserde.ExportedProgramDeserializer().deserialize(doc.program, state, consts, None)


# -- validation: what torch's deserializer would getattr or eval -------------------------

_OPS_RE = re.compile(r"torch\.ops\.[A-Za-z_]\w*\.[A-Za-z_]\w*(\.[A-Za-z_]\w*)?")
_OPERATOR_OK = {
    "getitem", "add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "neg", "pos", "abs",
    "eq", "ne", "lt", "le", "gt", "ge", "and_", "or_", "xor", "not_", "invert", "lshift", "rshift",
}  # fmt: skip
_MATH_OK = {"ceil", "floor", "trunc", "sqrt", "log", "exp", "sin", "cos", "tan", "fabs"}
_SYM_NAMES = {
    "sym_int", "sym_float", "sym_max", "sym_min", "sym_not", "sym_ite", "sym_sqrt", "sym_sum",
    "sym_fresh_size", "_sym_sqrt", "sym_and", "sym_or",
}  # fmt: skip


def check_target(target: str) -> None:
    """Refuse an operator name that is not a torch op or an allow-listed callable."""
    ok = False
    if _OPS_RE.fullmatch(target):
        resolved: Any = torch.ops
        for part in target.split(".")[2:]:
            resolved = getattr(resolved, part, None)
        ok = isinstance(resolved, (torch._ops.OpOverload, torch._ops.OpOverloadPacket, torch._ops.HigherOrderOperator))
    elif target.startswith("_operator."):
        ok = target[len("_operator.") :] in _OPERATOR_OK and hasattr(operator, target[10:])
    elif target.startswith("math."):
        ok = target[5:] in _MATH_OK
    elif target.startswith("torch."):
        ok = target[6:] in _SYM_NAMES
    if not ok:
        raise SchemaError(f"operator {target!r} is not a torch op or an allowed callable")


_EXPR_TOKEN = re.compile(r"\s*(?:(?P<str>'[\w.+-]{0,64}')|(?P<num>\d+(?:\.\d+)?(?:e[+-]?\d+)?)|(?P<name>[A-Za-z_]\w*)|(?P<op>\*\*|[-+*/%(),<>=!]=?|[&|~]))")
_SYMBOL_RE = re.compile(r"[a-z]{1,4}\d+")
_EXPR_NAMES = {
    "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "And", "Or", "Not", "Max", "Min", "Abs", "Mod", "floor",
    "ceiling", "sqrt", "oo", "zoo", "nan", "int_oo", "True", "False", "Integer", "Rational",
    "Float", "Piecewise", "Pow", "Mul", "Add", "Symbol", "I", "pi", "E",
    "FloorDiv", "ModularIndexing", "Where", "PythonMod", "CleanDiv", "CeilToInt", "FloorToInt",
    "CeilDiv", "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv", "IntTrueDiv",
    "IsNonOverlappingAndDenseIndicator", "TruncToFloat", "TruncToInt", "RoundToInt",
    "RoundDecimal", "ToFloat", "Identity", "StrictLessThan", "LessThan", "GreaterThan",
    "StrictGreaterThan", "Equality", "Unequality", "BooleanTrue", "BooleanFalse", "true", "false",
    "Infinity", "NegativeInfinity", "IntInfinity", "NegativeIntInfinity", "positive", "negative",
    "integer", "real", "nonnegative", "nonpositive", "finite", "commutative", "precision", "zero",
}  # fmt: skip


def check_expr(expr: str) -> None:
    """Only arithmetic on symbols and numbers may reach ``sympy.sympify`` (an ``eval``)."""
    if len(expr) > 4096 or expr.count("**") > 2:
        raise SchemaError(f"symbolic expression too large: {expr[:80]!r}")
    pos, prev_pow = 0, False
    while pos < len(expr):
        m = _EXPR_TOKEN.match(expr, pos)
        if m is None:
            if expr[pos:].strip() == "":
                break
            raise SchemaError(f"symbolic expression {expr[:80]!r}: unexpected {expr[pos:pos + 10]!r}")
        num, name = m.group("num"), m.group("name")
        if num is not None and (len(num) > 40 or (prev_pow and float(num) > 64)):
            raise SchemaError(f"symbolic expression {expr[:80]!r}: number {num[:20]!r} too large")
        if name is not None and name not in _EXPR_NAMES and not _SYMBOL_RE.fullmatch(name):
            raise SchemaError(f"symbolic expression {expr[:80]!r}: name {name!r} is not allowed")
        prev_pow = m.group("op") == "**"
        pos = m.end()


def _walk(obj: Any) -> Iterator[Any]:
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, tschema._Union):
            yield o
            stack.append(o.value)
        elif dataclasses.is_dataclass(o):
            yield o
            stack.extend(getattr(o, f.name) for f in dataclasses.fields(o))


def _validate(program: tschema.ExportedProgram) -> None:
    for o in _walk(program):
        if isinstance(o, tschema.Node):
            check_target(o.target)
            _check_source_fns(o.metadata.get("source_fn_stack"))
        elif isinstance(o, tschema.Argument) and o.type == "as_operator":
            check_target(o.value)
        elif isinstance(o, tschema.SymExpr):
            check_expr(o.expr_str)
    for spec in program.graph_module.signature.input_specs:
        if spec.type == "custom_obj" and not re.fullmatch(r"[\w.]+", spec.value.arg.class_fqn):
            raise SchemaError(f"custom object class {spec.value.arg.class_fqn!r} is malformed")


def _check_source_fns(text: str | None) -> None:
    """``source_fn_stack`` targets are getattr'd on torch (not called): keep them dotted names."""
    if not text:
        return
    for item in text.split(tserde.ST_DELIMITER):
        parts = item.split(",")
        if len(parts) != 2 or not re.fullmatch(r"[A-Za-z_][\w.]*", parts[1]) or "__" in parts[1]:
            raise SchemaError(f"malformed source_fn_stack entry {item[:80]!r}")
