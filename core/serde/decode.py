"""Torch side, decoding: exportlens program bytes -> a runnable ``ExportedProgram``.

The graph is rebuilt node by node with ``meta["val"]`` fake tensors in one
``FakeTensorMode`` (a ``ShapeEnv`` carries the symbols of dynamic dimensions and
their ranges), so the result behaves like a freshly exported program:
``ep.module()`` runs, ``run_decompositions`` works, the signature prints the same.
Static tensors are made directly from meta tensors (no dispatch through the fake
mode), which is most of why this is an order of magnitude faster than torch's own
deserializer.

Everything that would reach ``getattr`` or ``eval`` is validated first
(:mod:`exportlens.core.serde.validate`); anything malformed is a :class:`SchemaError`.
"""

from __future__ import annotations

import functools
from typing import Any

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.export import graph_signature as gs
from torch.export.exported_program import (
    ExportedProgram,
    ModuleCallEntry,
    ModuleCallSignature,
    _create_graph_module_for_export,
)
from torch.fx.experimental import symbolic_shapes
from torch.utils import _pytree as pytree
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from exportlens.core.serde import schema as S
from exportlens.core.serde.codec import SchemaError
from exportlens.core.serde.reader import StringTable, decode_document
from exportlens.core.serde.validate import check_expr, resolve_target
from exportlens.core.serde.weights import MAX_RANK, split_state, tensor_from_record, weights_from_arg

__all__ = ["from_bytes"]


def _sympy_functions() -> dict[str, Any]:  # the names torch's serializer may write
    from torch.utils._sympy import functions as f
    names = (
        "FloorDiv", "ModularIndexing", "Where", "PythonMod", "Mod", "CleanDiv", "CeilToInt",
        "FloorToInt", "CeilDiv", "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv",
        "IntTrueDiv", "IsNonOverlappingAndDenseIndicator", "TruncToFloat", "TruncToInt",
        "RoundToInt", "RoundDecimal", "ToFloat", "Identity",
    )  # fmt: skip
    return {n: getattr(f, n) for n in names if hasattr(f, n)}


_SYMPY_FUNCTIONS = _sympy_functions()


class _NeedsShapeEnv(Exception):
    """A program without ranges turned out to hold a symbol: decode again with a ShapeEnv."""


@functools.lru_cache(maxsize=4096)
def _parse_expr(text: str) -> Any:
    """``srepr`` text -> sympy expression. Expressions are immutable values, so one
    parse serves every load; the text is validated before ``sympify`` (an eval) sees it."""
    check_expr(text)
    try:
        return sympy.sympify(text, locals=_SYMPY_FUNCTIONS)
    except (sympy.SympifyError, TypeError, ValueError, SyntaxError) as e:
        raise SchemaError(f"symbolic expression {text[:80]!r}: {e}") from None


class _Decoder(StringTable):
    def __init__(self, strings: list[str], ranges: dict[str, ValueRanges], symbolic: bool) -> None:
        super().__init__(strings)
        self.ranges = ranges
        # A ShapeEnv only when the program has symbols: a static program does not
        # need one, and making it is a sizeable part of loading a small program.
        self._shape_env = symbolic_shapes.ShapeEnv(assume_static_by_default=True) if symbolic else None
        self.fake_mode = FakeTensorMode(allow_fallback_kernels=False, allow_non_fake_inputs=True, shape_env=self._shape_env)
        self.symbols: dict[str, Any] = {}
        self.exprs: dict[int, Any] = {}
        self.unbacked: set[Any] = set()
        self.devices: dict[int, torch.device] = {}
        self.dtypes: dict[int, torch.dtype] = {}

    @property
    def shape_env(self) -> symbolic_shapes.ShapeEnv:
        if self._shape_env is None:
            raise _NeedsShapeEnv
        return self._shape_env

    def bump_unbacked_counters(self) -> None:
        # Symbols the program already has ("u3") must not be handed out again by
        # passes that run on the loaded program and make new unbacked symbols.
        for name in self.ranges:
            for prefix, attr in (("u", "unbacked_symint_counter"), ("zuf", "unbacked_symfloat_counter")):
                if name.startswith(prefix) and name[len(prefix) :].isdigit():
                    n = int(name[len(prefix) :]) + 1
                    counter = getattr(self._shape_env, attr, None)
                    if isinstance(counter, int) and counter < n:
                        setattr(self._shape_env, attr, n)

    # ---- small enums

    def dtype(self, sid: Any) -> torch.dtype:
        dt = self.dtypes.get(sid)
        if dt is None:
            name = self.s(sid)
            dt = getattr(torch, name, None) if name in S.DTYPE_SIZES else None
            if not isinstance(dt, torch.dtype):
                raise SchemaError(f"unknown dtype {name!r}")
            self.dtypes[sid] = dt
        return dt

    def device(self, sid: Any) -> torch.device:
        dev = self.devices.get(sid)
        if dev is None:
            text = self.s(sid)
            if len(text) > 32:
                raise SchemaError(f"malformed device {text[:40]!r}")
            try:
                dev = torch.device(text)
            except RuntimeError as e:
                raise SchemaError(f"malformed device {text!r}") from e
            self.devices[sid] = dev
        return dev

    def _enum(self, sid: Any, kind: type) -> Any:
        name = self.s(sid)
        value = getattr(torch, name, None) if name.isidentifier() else None
        if not isinstance(value, kind):
            raise SchemaError(f"unknown {kind.__name__} {name!r}")
        return value

    # ---- symbolic expressions (the way torch's own deserializer registers them)

    def expr(self, sid: Any, hint: Any = None) -> Any:
        cached = self.exprs.get(sid)
        if cached is not None:
            return cached
        expr = self._register(_parse_expr(self.s(sid)), hint)
        self.exprs[sid] = expr
        return expr

    def _register(self, sym: Any, hint: Any = None) -> Any:
        if sym.is_Integer or sym.is_Float or sym.is_Boolean:
            return sym
        for arg in sym.args:
            self._register(arg)
        key = str(sym)
        if key in self.symbols:
            sym = self.symbols[key]
        else:
            self.symbols[key] = sym
            if isinstance(sym, sympy.Symbol) and symbolic_shapes.symbol_is_type(
                sym, (symbolic_shapes.SymT.UNBACKED_INT, symbolic_shapes.SymT.UNBACKED_FLOAT)
            ):
                self.unbacked.add(sym)
        if hint is not None and sym not in self.shape_env.backed_var_to_val:
            self.shape_env.add_backed_var_to_val(sym, hint)
        vr = self.ranges.get(key)
        if vr is not None:
            self.shape_env.constrain_symbol_range(sym, compiler_min=vr.lower, compiler_max=vr.upper)
        return sym

    def dim(self, d: Any) -> Any:
        if type(d) is int:
            return d
        if type(d) is not list or len(d) < 2:
            raise SchemaError(f"malformed dimension {d!r}")
        hint = d[1] if type(d[1]) is int else None
        return self.shape_env.create_symintnode(self.expr(d[0], hint), hint=hint)

    # ---- node values

    def val(self, v: Any) -> Any:
        if v is None or type(v) in (bool, int, float):
            return v
        if type(v) is not list or not v:
            raise SchemaError(f"malformed node value {v!r:.80}")
        tag = v[0]
        if tag == S.V_TENSOR:
            return self.tensor(v)
        if tag in (S.V_SYMINT, S.V_SYMFLOAT, S.V_SYMBOOL):
            hint = v[2] if len(v) > 2 else None
            if tag == S.V_SYMINT:
                hint = hint if type(hint) is int else None
                return self.shape_env.create_symintnode(self.expr(v[1], hint), hint=hint)
            if tag == S.V_SYMFLOAT:
                fhint = float(hint) if isinstance(hint, (int, float)) else None
                return self.shape_env.create_symfloatnode(self.expr(v[1], fhint), hint=fhint)
            return self.shape_env.create_symboolnode(self.expr(v[1]))
        if tag == S.V_LIST:
            return [self.val(x) for x in v[1:]]
        if tag == S.V_TUPLE:
            return tuple(self.val(x) for x in v[1:])
        if tag == S.V_CUSTOM_OBJ:
            return gs.CustomObjArgument(name=self.s(v[1]), class_fqn=self.s(v[2]))
        if tag == S.V_STR:
            return self.s(v[1])
        raise SchemaError(f"unknown node value tag {tag!r}")

    def tensor(self, v: list[Any]) -> Any:
        _, dtype_sid, sizes, strides, offset, device_sid, requires_grad = v[:7]
        if type(sizes) is not list or type(strides) is not list or len(sizes) > MAX_RANK or len(strides) not in (0, len(sizes)):
            raise SchemaError("malformed tensor sizes or strides")
        dtype, device = self.dtype(dtype_sid), self.device(device_sid)
        requires_grad = bool(requires_grad) and (dtype.is_floating_point or dtype.is_complex)
        if all(type(d) is int for d in sizes) and all(type(d) is int for d in strides) and type(offset) is int:
            if any(d < 0 for d in sizes) or any(d < 0 for d in strides) or offset < 0:
                raise SchemaError(f"negative size or stride in {sizes}/{strides}")
            if not strides:
                strides = _contiguous(sizes)
            if offset:
                extent = offset + 1 + sum((n - 1) * st for n, st in zip(sizes, strides, strict=True) if n > 0)
                elem = torch.empty(extent, dtype=dtype, device="meta").as_strided(sizes, strides, offset)
            else:
                elem = torch.empty_strided(sizes, strides, dtype=dtype, device="meta")
            if requires_grad:
                elem.requires_grad_(True)
            return FakeTensor(self.fake_mode, elem, device)
        # Symbolic sizes: the same direct construction, with SymInts from the ShapeEnv.
        sym_sizes = [self.dim(d) for d in sizes]
        sym_strides = [self.dim(d) for d in strides] if strides else _contiguous_sym(sym_sizes)
        elem = torch.empty_strided(sym_sizes, sym_strides, dtype=dtype, device="meta")
        if requires_grad:
            elem.requires_grad_(True)
        return FakeTensor(self.fake_mode, elem, device)

    # ---- arguments

    def arg(self, a: Any, nodes: list[torch.fx.Node]) -> Any:
        if a is None or type(a) in (bool, int, float):
            return a
        if type(a) is not list or not a:
            raise SchemaError(f"malformed argument {a!r:.80}")
        tag = a[0]
        if tag == S.A_NODE:
            i = a[1]
            if type(i) is not int or not 0 <= i < len(nodes):
                raise SchemaError(f"argument refers to node {i!r}, which is not defined before it")
            return nodes[i]
        if tag == S.A_STR:
            return self.s(a[1])
        if tag == S.A_LIST:
            return [self.arg(x, nodes) for x in a[1:]]
        if tag == S.A_TUPLE:
            return tuple(self.arg(x, nodes) for x in a[1:])
        if tag == S.A_DTYPE:
            return self.dtype(a[1])
        if tag == S.A_DEVICE:
            return self.device(a[1])
        if tag == S.A_LAYOUT:
            return self._enum(a[1], torch.layout)
        if tag == S.A_MEMORY_FORMAT:
            return self._enum(a[1], torch.memory_format)
        if tag == S.A_OP:
            return resolve_target(self.s(a[1]))
        if tag == S.A_COMPLEX:
            return complex(float(a[1]), float(a[2]))
        if tag == S.A_DICT:
            return {self.s(k): self.arg(x, nodes) for k, x in a[1:]}
        raise SchemaError(f"unknown argument tag {tag!r}")

    # ---- graph

    def meta(self, node: torch.fx.Node, m: Any) -> None:
        if m is None:
            return
        if type(m) is not list:
            raise SchemaError("malformed node metadata")
        m = m + [None] * (5 - len(m))
        if m[S.M_STACK] is not None:
            node.meta["stack_trace"] = self.s(m[S.M_STACK])
        if m[S.M_MODULE_STACK] is not None:
            node.meta["nn_module_stack"] = {self.s(k): (self.s(p), self.s(t)) for k, p, t in m[S.M_MODULE_STACK]}
        if m[S.M_SOURCE_FN] is not None:
            node.meta["source_fn_stack"] = [(self.s(n), self.s(t)) for n, t in m[S.M_SOURCE_FN]]
        if m[S.M_TORCH_FN] is not None:
            node.meta["torch_fn"] = (self.s(m[S.M_TORCH_FN][0]), self.s(m[S.M_TORCH_FN][1]))

    def graph(self, record: Any, root: torch.nn.Module, depth: int = 0) -> torch.fx.Graph:
        if depth > 16:
            raise SchemaError("higher-order subgraphs nested too deep")
        if type(record) is not list or len(record) < 2 or type(record[0]) is not list or type(record[1]) is not list:
            raise SchemaError("malformed graph")
        for name_sid, sub in record[S.G_SUBGRAPHS]:
            name = self.s(name_sid)
            if not name.isidentifier():
                raise SchemaError(f"malformed subgraph name {name!r}")
            sub_root = torch.nn.Module()
            sub_graph = self.graph(sub, sub_root, depth + 1)
            setattr(root, name, _create_graph_module_for_export(sub_root, sub_graph))
        g = torch.fx.Graph()
        nodes: list[torch.fx.Node] = []
        output = None
        for rec in record[S.G_NODES]:
            if type(rec) is not list or len(rec) < 7:
                raise SchemaError("malformed node")
            op, name = rec[S.N_OP], self.s(rec[S.N_NAME])
            args = tuple(self.arg(a, nodes) for a in rec[S.N_ARGS])
            kwargs = {self.s(k): self.arg(v, nodes) for k, v in rec[S.N_KWARGS]}
            if op == S.OP_PLACEHOLDER:
                node = g.create_node("placeholder", name, name=name)
            elif op == S.OP_GET_ATTR:
                target = self.s(rec[S.N_TARGET])
                if not all(p.isidentifier() for p in target.split(".")):
                    raise SchemaError(f"malformed attribute {target!r}")
                node = g.create_node("get_attr", target, name=name)
            elif op == S.OP_CALL_FUNCTION:
                node = g.create_node("call_function", resolve_target(self.s(rec[S.N_TARGET])), args, kwargs, name=name)
            elif op == S.OP_OUTPUT:
                if output is not None:
                    raise SchemaError("a graph with two outputs")
                node = output = g.output(args[0] if len(args) == 1 else args)
            else:
                raise SchemaError(f"unknown node op {op!r}")
            if op != S.OP_OUTPUT and rec[S.N_VAL] is not None:
                node.meta["val"] = self.val(rec[S.N_VAL])
            self.meta(node, rec[S.N_META])
            nodes.append(node)
        if output is None:
            raise SchemaError("a graph without output")
        out = output.args[0]
        if isinstance(out, torch.fx.Node):
            output.meta["val"] = out.meta.get("val")
        elif isinstance(out, (list, tuple)):
            output.meta["val"] = type(out)(a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in out)
        if self.unbacked and self._shape_env is not None:
            for node in g.nodes:
                val = node.meta.get("val")
                if val is not None and (
                    bindings := symbolic_shapes._free_unbacked_symbols_with_path(val, (), shape_env=self.shape_env, pending=self.unbacked, simplify=True)
                ):
                    node.meta["unbacked_bindings"] = bindings
        return g

    # ---- signature, call graph

    def sig_arg(self, a: Any) -> Any:
        if type(a) is not list or len(a) < 2:
            raise SchemaError(f"malformed signature argument {a!r:.80}")
        tag, name = a[0], self.s(a[1])
        if tag == S.SA_TENSOR:
            return gs.TensorArgument(name=name)
        if tag == S.SA_SYMINT:
            return gs.SymIntArgument(name=name)
        if tag == S.SA_SYMFLOAT:
            return gs.SymFloatArgument(name=name)
        if tag == S.SA_SYMBOOL:
            return gs.SymBoolArgument(name=name)
        if tag == S.SA_CUSTOM_OBJ:
            return gs.CustomObjArgument(name=name, class_fqn=self.s(a[2]))
        if tag == S.SA_TOKEN:
            return gs.TokenArgument(name=name)
        if tag == S.SA_CONSTANT:
            return gs.ConstantArgument(name=name, value=self.arg(a[2], []))
        raise SchemaError(f"unknown signature argument tag {tag!r}")

    def signature(self, sig: Any) -> gs.ExportGraphSignature:
        ins, outs = [], []
        for kind, arg, target, persistent, *_ in sig[S.S_INPUTS]:
            k = gs.InputKind.__members__.get(self.s(kind))
            if k is None:
                raise SchemaError(f"input kind {self.s(kind)!r} is unknown to torch {torch.__version__}")
            ins.append(gs.InputSpec(kind=k, arg=self.sig_arg(arg), target=self.opt(target), persistent=persistent))
        for kind, arg, target, *_ in sig[S.S_OUTPUTS]:
            k2 = gs.OutputKind.__members__.get(self.s(kind))
            if k2 is None:
                raise SchemaError(f"output kind {self.s(kind)!r} is unknown to torch {torch.__version__}")
            outs.append(gs.OutputSpec(kind=k2, arg=self.sig_arg(arg), target=self.opt(target)))
        return gs.ExportGraphSignature(input_specs=ins, output_specs=outs)

    def call_graph(self, entries: Any) -> list[ModuleCallEntry]:
        out = []
        for fqn, sig in entries:
            if sig is None:
                out.append(ModuleCallEntry(fqn=self.s(fqn), signature=None))
                continue
            ins, outs, in_spec, out_spec, names, *_ = sig
            out.append(
                ModuleCallEntry(
                    fqn=self.s(fqn),
                    signature=ModuleCallSignature(
                        inputs=[self.sig_arg(a) for a in ins],
                        outputs=[self.sig_arg(a) for a in outs],
                        in_spec=_treespec(self.s(in_spec)),
                        out_spec=_treespec(self.s(out_spec)),
                        forward_arg_names=[self.s(n) for n in names] if names is not None else None,
                    ),
                )
            )
        return out


def _contiguous(sizes: list[int]) -> list[int]:
    strides, acc = [], 1
    for n in reversed(sizes):
        strides.append(acc)
        acc *= max(n, 1)
    return strides[::-1]


def _contiguous_sym(sizes: list[Any]) -> list[Any]:
    strides: list[Any] = []
    acc: Any = 1
    for n in reversed(sizes):
        strides.append(acc)
        acc = acc * n if not isinstance(n, int) else acc * max(n, 1)
    return strides[::-1]


def _treespec(text: str) -> pytree.TreeSpec:
    # ``treespec_loads`` parses JSON and looks types up in pytree's registry by name:
    # it never imports or evaluates anything.
    try:
        return pytree.treespec_loads(text)
    except (ValueError, KeyError, TypeError, NotImplementedError) as e:
        raise SchemaError(f"malformed pytree spec: {e}") from None


def _decode_parts(doc: dict[int, Any], ranges: dict[str, ValueRanges], symbolic: bool) -> tuple[Any, ...]:
    st: list[str] = doc[S.P_STRINGS]
    dec = _Decoder(st, ranges, symbolic)
    dec.bump_unbacked_counters()
    signature = dec.signature(doc[S.P_SIGNATURE])
    root = torch.nn.Module()
    graph = dec.graph(doc[S.P_GRAPH], root)
    call_graph = dec.call_graph(doc.get(S.P_CALL_GRAPH, []))
    verifiers = [dec.s(v) for v in doc.get(S.P_VERIFIERS, [])]
    return dec, signature, root, graph, call_graph, verifiers


def from_bytes(data: bytes | bytearray | memoryview, *, weights: Any = None) -> ExportedProgram:
    doc = decode_document(data)
    st: list[str] = doc[S.P_STRINGS]
    try:
        ranges: dict[str, ValueRanges] = {}
        for name_sid, lo, hi in doc.get(S.P_RANGES, []):
            ranges[st[name_sid]] = ValueRanges(
                sympy.Integer(lo) if type(lo) is int else -int_oo,
                sympy.Integer(hi) if type(hi) is int else int_oo,
            )
        try:
            dec, signature, root, graph, call_graph, verifiers = _decode_parts(doc, ranges, symbolic=bool(ranges))
        except _NeedsShapeEnv:
            dec, signature, root, graph, call_graph, verifiers = _decode_parts(doc, ranges, symbolic=True)
        pool: dict[str, Any] = {}
        for rec in doc.get(S.P_WEIGHTS) or []:
            name, _, tensor = tensor_from_record(st, rec)
            pool[name] = tensor
    except SchemaError:
        raise
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, AssertionError, RuntimeError, RecursionError) as e:
        raise SchemaError(f"inconsistent program: {type(e).__name__}: {e}") from None
    module = weights if isinstance(weights, torch.nn.Module) else None
    if weights is not None:
        pool.update(weights_from_arg(weights))
    state, consts = split_state(signature, pool, module)
    from torch._export.verifier import load_verifier

    range_constraints = {dec.symbols[k]: v for k, v in ranges.items() if k in dec.symbols}
    try:
        loaded_verifiers = [load_verifier(v) for v in verifiers]
    except KeyError as e:
        raise SchemaError(f"unknown verifier dialect {e}") from None
    return ExportedProgram(
        root=root,  # ExportedProgram makes the GraphModule (one code generation, not two)
        graph=graph,
        graph_signature=signature,
        state_dict=state,
        range_constraints=range_constraints,
        module_call_graph=call_graph,
        constants=consts,
        verifiers=loaded_verifiers or None,
    )
