"""Torch side, decoding: rebuilding an fx graph from its records, node by node.

The graph is rebuilt with ``meta["val"]`` fake tensors in one ``FakeTensorMode`` (a
``ShapeEnv`` carries the symbols of dynamic dimensions and their ranges), so the
program assembled from it (:mod:`exportlens.core.serde.decode`) behaves like a freshly
exported one. Static tensors are made directly from meta tensors (no dispatch through
the fake mode), which is most of why this is an order of magnitude faster than torch's
own deserializer.

The bytes are hostile. Every name that fx pastes into the Python source it generates
is checked first (:func:`~exportlens.core.serde.validate.check_name`,
:func:`~exportlens.core.serde.validate.check_path`), operator names resolve only to
torch ops (:func:`~exportlens.core.serde.validate.resolve_target`), expressions go
through a restricted grammar (:mod:`exportlens.core.serde.expressions`), and the text
pasted into generated code is bounded by a budget proportional to the input.
"""

from __future__ import annotations

from typing import Any

import sympy
import torch
from torch.export import graph_signature as gs
from torch.fx.experimental import symbolic_shapes

from exportlens.core.serde import schema as S
from exportlens.core.serde.codec import SchemaError
from exportlens.core.serde.expressions import parse_expr
from exportlens.core.serde.reader import StringTable
from exportlens.core.serde.validate import check_name, check_path, resolve_target
from exportlens.core.serde.weights import MAX_RANK
from exportlens.core.torchcompat import FakeTensor, FakeTensorMode, ValueRanges, add_hint
from exportlens.core.torchcompat import create_graph_module_for_export as _create_graph_module_for_export

__all__ = ["GraphBuilder", "NeedsShapeEnv"]


class NeedsShapeEnv(Exception):
    """A program without ranges turned out to hold a symbol: decode again with a ShapeEnv."""


class GraphBuilder(StringTable):
    """One program's graphs, values and arguments, in one fake mode and shape environment."""

    def __init__(self, strings: list[str], ranges: dict[str, ValueRanges], symbolic: bool, code_budget: int) -> None:
        super().__init__(strings)
        self.ranges = ranges
        # Characters of names and string constants fx will paste into generated code:
        # a long string referenced from thousands of arguments must not turn a small
        # input into gigabytes of source.
        self.code_budget = code_budget
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
            raise NeedsShapeEnv
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
        expr = self._register(parse_expr(self.s(sid)), hint)
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
        if hint is not None:
            add_hint(self.shape_env, sym, hint)
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

    def _pasted(self, text: str) -> str:
        self.code_budget -= len(text) + 8
        if self.code_budget < 0:
            raise SchemaError("the program's generated code would be out of proportion to its bytes (a long string referenced many times)")
        return text

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
            self._pasted(nodes[i].name)
            return nodes[i]
        if tag == S.A_STR:
            return self._pasted(self.s(a[1]))
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
            return {self._pasted(self.s(k)): self.arg(x, nodes) for k, x in a[1:]}
        raise SchemaError(f"unknown argument tag {tag!r}")

    # ---- graph

    def meta(self, node: torch.fx.Node, m: Any) -> None:
        if m is None:
            return
        if type(m) is not list:
            raise SchemaError("malformed node metadata")
        m = m + [None] * (5 - len(m))
        if m[S.M_STACK] is not None:
            trace = self.s(m[S.M_STACK])
            # fx quotes a trace's last frame in a ``#`` comment of the code it prints;
            # Python ends a comment at a lone carriage return too.
            if "\r" in trace:
                raise SchemaError("a stack trace holds a carriage return")
            node.meta["stack_trace"] = trace
        if m[S.M_MODULE_STACK] is not None:
            # Unflattening makes ``call_module`` nodes of these paths.
            node.meta["nn_module_stack"] = {
                self.s(k): (check_path(self.s(p), "module path", root_ok=True), self.s(t)) for k, p, t in m[S.M_MODULE_STACK]
            }
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
            name = check_name(self.s(name_sid), "subgraph name")
            sub_root = torch.nn.Module()
            sub_graph = self.graph(sub, sub_root, depth + 1)
            setattr(root, name, _create_graph_module_for_export(sub_root, sub_graph))
        g = torch.fx.Graph()
        nodes: list[torch.fx.Node] = []
        names: set[str] = set()
        output = None
        for rec in record[S.G_NODES]:
            if type(rec) is not list or len(rec) < 7:
                raise SchemaError("malformed node")
            op, name = rec[S.N_OP], self.s(rec[S.N_NAME])
            if op != S.OP_OUTPUT:
                # fx would rename a duplicate or an odd name, and the signature would
                # no longer match; a placeholder's name is its parameter in ``def forward``.
                check_name(name, "node name")
                if name in names:
                    raise SchemaError(f"two nodes named {name!r}")
                names.add(name)
            args = tuple(self.arg(a, nodes) for a in rec[S.N_ARGS])
            kwargs = {self._pasted(check_name(self.s(k), "keyword argument")): self.arg(v, nodes) for k, v in rec[S.N_KWARGS]}
            if op == S.OP_PLACEHOLDER:
                node = g.create_node("placeholder", name, name=name)
            elif op == S.OP_GET_ATTR:
                target = self._pasted(check_path(self.s(rec[S.N_TARGET]), "attribute"))
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

    def sig_arg(self, a: Any) -> Any:
        if type(a) is not list or len(a) < 2:
            raise SchemaError(f"malformed signature argument {a!r:.80}")
        tag, name = a[0], self.s(a[1])
        if tag != S.SA_CONSTANT:  # every other argument names a node: an identifier
            check_name(name, "signature argument")
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
