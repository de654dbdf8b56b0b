"""Torch side, decoding: exportlens program bytes -> a runnable ``ExportedProgram``.

This module assembles the program: ranges, the graph (rebuilt by
:mod:`exportlens.core.serde.rebuild`), the signature, the module call graph, weights
and verifiers, then torch's ``ExportedProgram``.

It is also the one error boundary of decoding. The bytes are hostile; what they
name and compute is checked before torch sees it, but torch's own graph building and
``ExportedProgram`` checks still raise what they raise (``SpecViolationError``,
``IndexError``, ``TypeError``...) on data that is well-formed record by record yet
inconsistent as a program. Every such failure leaves :func:`from_bytes` as the one
documented :class:`SchemaError`, with the original exception as its cause. A
``MemoryError`` is not converted: bounded input must not need it, so it is a bug.
"""

from __future__ import annotations

from typing import Any

import sympy
import torch
from torch.export import graph_signature as gs
from torch.export.exported_program import ExportedProgram, ModuleCallEntry, ModuleCallSignature

from exportlens.core.serde import schema as S
from exportlens.core.serde.codec import SchemaError
from exportlens.core.serde.expressions import SYMBOL_NAME
from exportlens.core.serde.reader import StringTable, decode_document
from exportlens.core.serde.rebuild import GraphBuilder, NeedsShapeEnv
from exportlens.core.serde.validate import check_name, check_path
from exportlens.core.serde.weights import split_state, tensor_from_record, weights_from_arg
from exportlens.core.torchcompat import SpecViolationError, ValueRanges, int_oo, load_verifier, pytree

__all__ = ["from_bytes"]

# What torch and sympy raise on a program that is inconsistent (not on one of ours).
# RuntimeError covers torch's ValueRangeError, data-dependent and fake-tensor errors;
# ArithmeticError covers OverflowError and ZeroDivisionError.
_INCONSISTENT = (
    SpecViolationError, TypeError, ValueError, IndexError, KeyError, AttributeError, AssertionError,
    RuntimeError, RecursionError, ArithmeticError,
)  # fmt: skip

# Kinds whose input spec names the state it reads (``target``).
_STATE_KINDS = (gs.InputKind.PARAMETER, gs.InputKind.BUFFER, gs.InputKind.CONSTANT_TENSOR, gs.InputKind.CUSTOM_OBJ)


def _signature(dec: GraphBuilder, sig: Any) -> gs.ExportGraphSignature:
    # Targets are attribute paths: ``ep.module()`` makes ``get_attr`` nodes of them.
    ins, outs = [], []
    for kind, arg, target, persistent, *_ in sig[S.S_INPUTS]:
        k = gs.InputKind.__members__.get(dec.s(kind))
        if k is None:
            raise SchemaError(f"input kind {dec.s(kind)!r} is unknown to torch {torch.__version__}")
        t = dec.opt(target)
        if t is None and k in _STATE_KINDS:
            raise SchemaError(f"a {k.name} input without a target")
        ins.append(gs.InputSpec(kind=k, arg=dec.sig_arg(arg), target=t if t is None else check_path(t, "input target"), persistent=persistent))
    for kind, arg, target, *_ in sig[S.S_OUTPUTS]:
        k2 = gs.OutputKind.__members__.get(dec.s(kind))
        if k2 is None:
            raise SchemaError(f"output kind {dec.s(kind)!r} is unknown to torch {torch.__version__}")
        t = dec.opt(target)
        outs.append(gs.OutputSpec(kind=k2, arg=dec.sig_arg(arg), target=t if t is None else check_path(t, "output target")))
    return gs.ExportGraphSignature(input_specs=ins, output_specs=outs)


def _call_graph(dec: GraphBuilder, entries: Any) -> list[ModuleCallEntry]:
    # ``ep.module()`` writes ``def forward(self, <forward arg names>)`` and a dict of the
    # in_spec's keyword names; unflattening makes ``call_module`` nodes of the fqns.
    out = []
    for fqn_sid, sig in entries:
        fqn = check_path(dec.s(fqn_sid), "module call graph entry", root_ok=True)
        if sig is None:
            out.append(ModuleCallEntry(fqn=fqn, signature=None))
            continue
        ins, outs, in_spec, out_spec, names, *_ = sig
        forward_args = [check_name(dec.s(n), "forward argument") for n in names] if names is not None else None
        if forward_args is not None and len(set(forward_args)) != len(forward_args):
            raise SchemaError(f"forward argument names repeat: {forward_args!r:.120}")  # ``def forward(self, x, x)``
        out.append(
            ModuleCallEntry(
                fqn=fqn,
                signature=ModuleCallSignature(
                    inputs=[dec.sig_arg(a) for a in ins],
                    outputs=[dec.sig_arg(a) for a in outs],
                    in_spec=_in_spec(dec.s(in_spec)),
                    out_spec=_treespec(dec.s(out_spec)),
                    forward_arg_names=forward_args,
                ),
            )
        )
    return out


def _treespec(text: str) -> pytree.TreeSpec:
    # ``treespec_loads`` parses JSON and looks types up in pytree's registry by name:
    # it never imports or evaluates anything.
    try:
        return pytree.treespec_loads(text)
    except (ValueError, KeyError, TypeError, NotImplementedError, RecursionError) as e:
        raise SchemaError(f"malformed pytree spec: {e}") from None


def _in_spec(text: str) -> pytree.TreeSpec:
    """An input spec. When it is ``(args, kwargs)``, fx writes the keyword names into
    the generated ``forward`` (``{'x': x}``, or as parameters): they must be identifiers."""
    spec = _treespec(text)
    if spec.type is tuple and spec.num_children == 2 and spec.child(0).type is tuple and spec.child(1).type is dict:
        for key in spec.child(1).context:
            if type(key) is not str:
                raise SchemaError(f"keyword argument name {key!r} in an input spec is not a string")
            check_name(key, "keyword argument name in an input spec")
    return spec


def _ranges(doc: dict[int, Any], st: list[str]) -> dict[str, ValueRanges]:
    ranges: dict[str, ValueRanges] = {}
    table = StringTable(st)
    for name_sid, lo, hi in doc.get(S.P_RANGES, []):
        name = table.s(name_sid)
        if not SYMBOL_NAME.fullmatch(name):
            raise SchemaError(f"range of {name[:40]!r}, which is not a symbol name")
        ranges[name] = ValueRanges(
            sympy.Integer(lo) if type(lo) is int else -int_oo,
            sympy.Integer(hi) if type(hi) is int else int_oo,
        )
    return ranges


def _decode_parts(doc: dict[int, Any], ranges: dict[str, ValueRanges], symbolic: bool, size: int) -> tuple[Any, ...]:
    dec = GraphBuilder(doc[S.P_STRINGS], ranges, symbolic, code_budget=64 * size + (1 << 20))
    dec.bump_unbacked_counters()
    signature = _signature(dec, doc[S.P_SIGNATURE])
    root = torch.nn.Module()
    graph = dec.graph(doc[S.P_GRAPH], root)
    call_graph = _call_graph(dec, doc.get(S.P_CALL_GRAPH, []))
    verifiers = [dec.s(v) for v in doc.get(S.P_VERIFIERS, [])]
    return dec, signature, root, graph, call_graph, verifiers


def _assemble(doc: dict[int, Any], size: int, extra: dict[str, Any], module: Any) -> ExportedProgram:
    st: list[str] = doc[S.P_STRINGS]
    ranges = _ranges(doc, st)
    try:
        dec, signature, root, graph, call_graph, verifiers = _decode_parts(doc, ranges, bool(ranges), size)
    except NeedsShapeEnv:
        dec, signature, root, graph, call_graph, verifiers = _decode_parts(doc, ranges, True, size)
    pool: dict[str, Any] = {}
    for rec in doc.get(S.P_WEIGHTS) or []:
        name, _, tensor = tensor_from_record(st, rec)
        pool[name] = tensor
    pool.update(extra)
    state, consts = split_state(signature, pool, module)
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


def from_bytes(data: bytes | bytearray | memoryview, *, weights: Any = None) -> ExportedProgram:
    doc = decode_document(data)
    # The caller's own argument: a wrong type is the caller's TypeError, not the bytes'.
    extra = weights_from_arg(weights) if weights is not None else {}
    module = weights if isinstance(weights, torch.nn.Module) else None
    try:
        return _assemble(doc, len(data), extra, module)
    except SchemaError:
        raise
    except _INCONSISTENT as e:
        first = str(e).strip().split("\n", 1)[0][:200]
        raise SchemaError(f"inconsistent program: {type(e).__name__}: {first}") from e
