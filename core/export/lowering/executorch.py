"""Lowering to ExecuTorch: edge dialect, the XNNPACK delegate, a ``.pte`` program, its run.

``to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])`` then
``to_executorch()``, as ExecuTorch's own guides do for CPU, then the program is loaded
in ``executorch.runtime.Runtime`` and run on the example inputs, whose outputs
``destination.lower_to`` compares with eager. ExecuTorch's failures come late and far
from the code -- a ``.pte`` that builds but whose method will not load on the device
(``Missing operator: aten::sort.values``), ops that silently fall back from the
delegate to slow portable kernels -- and both are knowable here, node by node, each
node carrying the user's stack. Its findings:

- ``lowering/executorch-error``: a conversion, verifier or partitioner failure (at
  the line of the node it was handling, else of the nodes its message names, else the
  target's), ExecuTorch's message after a plain sentence; a method that fails to load
  or run for another reason (and the missing extra, said by ``destination``);
- ``lowering/executorch-not-delegated`` (information): a line whose nodes stay
  outside the XNNPACK delegate, with their ops: they run on portable CPU kernels;
- ``lowering/executorch-missing-kernel``: an op of the program the runtime has no
  kernel for, at each line that makes it (the method would not load).

With fake weights (``Built.weights``: large weights without values, where real
ones would not fit or are not needed) the edge and partition steps still run -- they
need no values -- through a stand-in backend that records the XNNPACK partition
without compiling it; the program, its run and the comparison are skipped, and say so.
Runs in the job process only (torch, executorch).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from exportlens.core.export.lowering import fx_nodes, memory, randomness
from exportlens.core.export.lowering.destination import Lowered, Stop, Subject, quiet
from exportlens.core.export.lowering.outputs import user_outputs
from exportlens.core.export.weights import values_real
from exportlens.core.model.lowering import EXECUTORCH_INSTALL, EXECUTORCH_PACKAGES, Lowering
from exportlens.core.model.results import Diagnostic
from exportlens.core.model.signature import SourceLine

ERROR = "lowering/executorch-error"
NOT_DELEGATED = "lowering/executorch-not-delegated"
MISSING_KERNEL = "lowering/executorch-missing-kernel"
# ExecuTorch's words for a custom op with no out variant: ``{'mylib::op'}``.
_MISSING_OUT = re.compile(r"Missing out variants: \{([^}]*)\}")
# Loggers that speak while ExecuTorch imports and lowers: torchao's optional CUDA
# libraries, torch's pytree deprecations, ExecuTorch's own notes. None of it is the
# user's business, and in the job it would land in the model's output.
_NOISY = ("", "torchao", "executorch", "torch.utils._pytree", "torch._export")


class Executorch:
    format = "executorch"
    title = "ExecuTorch"
    runtime = "ExecuTorch"
    product = "program"
    packages = EXECUTORCH_PACKAGES
    install = EXECUTORCH_INSTALL

    def lower(self, subject: Subject, versions: str) -> Lowered:
        record = Lowering("executorch", "error", versions=versions)
        fake = not values_real(subject.built)
        with quiet(*_NOISY):
            from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
            from executorch.exir import to_edge_transform_and_lower

            partitioner = XnnpackPartitioner()
            try:
                edge = to_edge_transform_and_lower(subject.ep, partitioner=[_partition_only(partitioner) if fake else partitioner])
            except Exception as e:  # noqa: BLE001 - every conversion failure is a finding
                return Lowered(replace(record, errors=(fx_nodes.text(fx_nodes.chain(e)[-1]),)), _failure("Lowering the exported program to ExecuTorch's edge dialect with the XNNPACK partitioner failed", e, subject, subject.ep))
            coverage, found = _coverage(edge.exported_program(), subject)
            record = replace(record, **coverage)
            # Before ``to_executorch``, whose passes rewrite the edge program's graph.
            needs = memory.measure(edge.exported_program(), subject)
            if fake:
                # The plan needs no values: ExecuTorch's passes and planner, stopped before
                # the emitter; made with the stand-in delegate, not XNNPACK's compiled one.
                planned = _plan_only(edge)
                record, more, _ = memory.weigh(record, needs, planned, subject)
                made = "the edge program, its XNNPACK partition and its memory plan need" if planned is not None else "the edge program and its XNNPACK partition need"
                skipped = f"built with fake weights: {made} no values, but the .pte was not built, run or compared with eager"
                if subject.keep:
                    # The weights policy was asked for real ones and said they do not fit.
                    skipped += "; it was not saved: that needs real weights, which would not fit the memory cap (memory_mb)"
                return Lowered(replace(record, status="not-run", skipped=skipped), found + more)
            edge_program = edge.exported_program()
            try:
                program = edge.to_executorch()
                pte = bytes(program.buffer)
            except Exception as e:  # noqa: BLE001
                return Lowered(replace(record, errors=(fx_nodes.text(fx_nodes.chain(e)[-1]),)), found + _failure("Building the ExecuTorch program from the edge program failed", e, subject, edge_program))
        plan = program.executorch_program.execution_plan[0]
        # The memory plan's arenas (the first, id 0, is reserved and empty): what the
        # method allocates for activations and mutable buffers on the device.
        planned = int(sum(plan.non_const_buffer_sizes))
        record = replace(record, pte_bytes=len(pte), model=pte if subject.keep else b"")
        record, more, place = memory.weigh(record, needs, planned, subject)
        found = found + more
        finding = memory.over_cap_finding(replace(needs, planned=planned), subject, place) if needs is not None and place is not None else None
        if finding is not None:
            # Run, it would take the job past its cap and be killed: said instead, where it is decided.
            skipped, warning = finding
            return Lowered(replace(record, status="not-run", skipped=skipped), found + [warning])
        # The method returns the user outputs in the exported program's order (a
        # constant, ``None``, too); the edge passes rename their nodes, so they go by
        # the export's names.
        names = tuple(o.name for o in user_outputs(subject.ep))
        return Lowered(record, found, program, names, place)

    def run(self, lowered: Lowered, subject: Subject) -> list[Any]:
        import torch
        from torch.utils import _pytree as pytree

        with quiet(*_NOISY):
            from executorch.runtime import Runtime, Verification

            runtime = Runtime.get()
        program = lowered.program
        plan = program.executorch_program.execution_plan[0]
        known = runtime.operator_registry.operator_names
        missing = [name for name in (_plan_op(op) for op in plan.operators) if name not in known]
        if missing:
            found = _missing_kernels(missing, program.exported_program(), subject)
            raise Stop("missing-kernel", found, tuple(f"no kernel for {op}" for op in missing))
        built = subject.built
        args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), (built.args, built.kwargs or {}))
        flat, _ = subject.ep._get_flat_args_with_check(args, kwargs)
        before = memory.resident_bytes()
        measured = memory.reset_peak()
        loaded = runtime.load_program(lowered.record.model or bytes(program.buffer), verification=Verification.Minimal)
        method = loaded.load_method("forward")
        outputs = list(method.execute(flat))
        peak = memory.peak_bytes() if measured else None
        if peak is not None and before:
            lowered.record = replace(lowered.record, run_peak_bytes=max(0, peak - before))
        return outputs


# -- memory --------------------------------------------------------------------------


class _Planned(Exception):
    """Raised by ``_PlanOnly`` once the plan is made: stops ``to_executorch`` before it
    emits the program, which would copy the weights' values."""


def _plan_only(edge: Any) -> int | None:
    """The memory plan's bytes of ``edge`` built with fake weights: ExecuTorch's own
    passes and memory planning, as ``to_executorch`` runs them, stopped before the
    emitter (which needs the values); None when that fails (the plan is then unknown)."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    class _PlanOnly:
        def __init__(self) -> None:
            self.inner = MemoryPlanningPass()
            self.sizes: list[int] | None = None

        def run(self, graph_module: Any, signature: Any = None) -> Any:
            result = self.inner.run(graph_module, signature)
            self.sizes = list(result.graph_module.meta.get("non_const_buffer_sizes") or [])
            raise _Planned

    planner = _PlanOnly()
    try:
        edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=planner))
    except _Planned:
        return int(sum(planner.sizes)) if planner.sizes else None
    except Exception:  # noqa: BLE001 - a pass that needs values: the plan stays unknown
        return None
    return None


# -- fake weights: partition without compiling ----------------------------------------


def _partition_only(partitioner: Any) -> Any:
    """``partitioner`` whose partitions go to a backend that compiles nothing: the same
    nodes are kept from decomposition, tagged and cut out as XNNPACK would take them,
    and nothing reads a weight (XNNPACK's preprocess copies them into its blob)."""
    return _stand_ins()(partitioner)


_BACKEND_NAME = "ExportlensPartitionOnly"
_stand_in: Any = None


def _stand_ins() -> Any:
    """The partitioner wrapper class, and the backend it names, made once per process:
    ExecuTorch finds a backend by class name among ``BackendDetails``' direct
    subclasses, so a second class of that name would be ambiguous."""
    global _stand_in
    if _stand_in is not None:
        return _stand_in
    from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
    from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult

    def preprocess(edge_program: Any, compile_specs: Any) -> Any:
        return PreprocessResult(processed_bytes=b"")

    # Held below: ``__subclasses__`` keeps only weak references.
    backend = type(_BACKEND_NAME, (BackendDetails,), {"preprocess": staticmethod(preprocess)})

    class PartitionOnly(Partitioner):  # type: ignore[misc]
        def __init__(self, inner: Any) -> None:
            super().__init__(inner.spec)
            self.inner = inner

        def partition(self, exported_program: Any) -> Any:
            result = self.inner.partition(exported_program)
            tags = {tag: DelegationSpec(_BACKEND_NAME, list(spec.compile_specs)) for tag, spec in result.partition_tags.items()}
            return PartitionResult(tagged_exported_program=result.tagged_exported_program, partition_tags=tags)

        def ops_to_not_decompose(self, ep: Any) -> Any:
            return self.inner.ops_to_not_decompose(ep)

        def transform_for_pre_decomposition(self, exported_program: Any) -> Any:
            return self.inner.transform_for_pre_decomposition(exported_program)

    PartitionOnly.backend = backend
    _stand_in = PartitionOnly
    return _stand_in


# -- delegation coverage -------------------------------------------------------------


def _is_op(node: Any) -> bool:
    """A node that computes: an op call, not the delegate's call, a ``getitem`` of its
    results, or arithmetic on sizes (``sym_size``, ``operator.mul``), which runs in
    the runtime's own instructions."""
    if node.op != "call_function":
        return False
    target = node.target
    if not hasattr(target, "_schema"):
        return type(target).__name__ == "HigherOrderOperator" and getattr(target, "__name__", "") != "executorch_call_delegate"
    name = fx_nodes.op_name(target)
    return not name.startswith(("aten::sym_", "aten::_assert", "aten::sym_constrain"))


def _coverage(edge: Any, subject: Subject) -> tuple[dict[str, Any], list[Diagnostic]]:
    """The delegated and total op counts of the edge program, and one
    ``executorch-not-delegated`` per user line whose ops stay outside the delegate."""
    graph_module = edge.graph_module
    delegated = 0
    outside = []
    for module in fx_nodes.graph_modules(graph_module):
        for node in module.graph.nodes:
            if node.op == "call_function" and getattr(node.target, "__name__", "") == "executorch_call_delegate":
                lowered = getattr(module, node.args[0].target)
                delegated += sum(_is_op(n) for n in lowered.original_module.graph.nodes)
            elif _is_op(node):
                outside.append(node)
    by_line: dict[tuple[str, int], tuple[SourceLine, list[str]]] = {}
    unplaced: list[str] = []
    for node in outside:
        op = fx_nodes.op_name(node.target)
        where = subject.line_of(node)
        if where is None:
            unplaced.append(op)
            continue
        ops = by_line.setdefault((where.path or "", where.line), (where, []))[1]
        if op not in ops:
            ops.append(op)
    found = [Diagnostic.at(NOT_DELEGATED, _not_delegated(ops), where, subject.name) for where, ops in by_line.values()]
    if unplaced:
        # Nodes no line of the user's made (a pass inserted them): said once, at the target.
        ops = sorted(set(unplaced))
        found.append(Diagnostic.at(NOT_DELEGATED, _not_delegated(ops, unplaced=len(unplaced)), subject.candidate.where, subject.name))
    coverage = {
        "delegated_ops": delegated,
        "total_ops": delegated + len(outside),
        "fallback_lines": len(by_line),
        "fallback_ops": tuple(sorted({fx_nodes.op_name(n.target) for n in outside})),
    }
    return coverage, found


def _not_delegated(ops: list[str], *, unplaced: int = 0) -> str:
    names = ", ".join(f"`{op}`" for op in ops)
    if unplaced:
        return f"{unplaced} op{'s' * (unplaced != 1)} no line of yours made ({names}) stay outside the XNNPACK delegate: they run on portable CPU kernels"
    if len(ops) == 1:
        return f"{names} is not delegated to XNNPACK: it runs on portable CPU kernels"
    return f"{names} are not delegated to XNNPACK: they run on portable CPU kernels"


# -- failures ------------------------------------------------------------------------


def _plan_op(op: Any) -> str:
    """An operator of the program's instruction list as the runtime's registry names it."""
    return f"{op.name}.{op.overload}" if op.overload else str(op.name)


def _missing_kernels(missing: list[str], program: Any, subject: Subject) -> list[Diagnostic]:
    """One ``executorch-missing-kernel`` per line that makes a node of a missing op."""
    wheres: dict[tuple[str, int], tuple[SourceLine, list[str]]] = {}
    for node in program.graph_module.graph.nodes:
        if node.op != "call_function" or not hasattr(node.target, "_schema"):
            continue
        op = fx_nodes.op_name(node.target)
        if op not in missing:
            continue
        where = subject.line_of(node) or subject.candidate.where
        ops = wheres.setdefault((where.path or "", where.line), (where, []))[1]
        if op not in ops:
            ops.append(op)
    if not wheres:
        wheres[("", subject.candidate.where.line)] = (subject.candidate.where, list(missing))
    found = []
    for where, ops in wheres.values():
        names = ", ".join(f"`{op}`" for op in ops)
        message = (
            f"ExecuTorch's runtime has no kernel for {names}: the program builds, but its method fails to load "
            f"(\"Missing operator\"). Compute it with ops the runtime has, or register a kernel for it in the runtime you deploy"
        )
        found.append(Diagnostic.at(MISSING_KERNEL, message, where, subject.name))
    return found


def _failure(sentence: str, e: BaseException, subject: Subject, program: Any) -> list[Diagnostic]:
    """An ``executorch-error`` at the line of the node ExecuTorch was handling, else at
    each line making an op its message names, else at the target."""
    chain = fx_nodes.chain(e)
    node = fx_nodes.failing_node(chain)
    detail = fx_nodes.text(chain[-1])
    wheres: list[SourceLine] = []
    at_node = ""
    if node is not None:
        at_node = f" at node `{node.name}` ({fx_nodes.op_name(node.target)})"
        where = subject.line_of(node)
        if randomness.is_random(node):
            # The line that draws, inside whatever helper ``forward`` called.
            where = _drawing_line(node, subject) or where
        if where is not None:
            wheres.append(where)
    if not wheres:
        wheres = _lines_of_ops_named(detail, program, subject)
    hint = _random_hint(node, detail)
    missing_out = _MISSING_OUT.search(detail)
    if missing_out:
        # A custom op: ExecuTorch runs every op through its out variant (``op.out``).
        hint = f"ExecuTorch runs each op through its out variant (`op.out`), and {missing_out.group(1)} has none: define one for the custom op, with a kernel in the runtime you deploy. "
    message = f"{sentence}{at_node}: {hint}{detail}"
    return [Diagnostic.at(ERROR, message, where, subject.name) for where in wheres or [subject.candidate.where]]


def _drawing_line(node: Any, subject: Subject) -> SourceLine | None:
    """The user's line the eager run drew ``node``'s numbers at (its n-th call of the op)."""
    op = fx_nodes.op_name(node.target)
    same = [n for n in node.graph.nodes if n.op == "call_function" and n.target is node.target]
    draw = randomness.placed(randomness.Draw(op, None, same.index(node)), randomness.drawn_lines(subject.built, subject.sources))
    return draw.where


# An op of ExecuTorch's message: ``torch._ops.aten.randn_like.default``.
_ATEN_OP = re.compile(r"aten\.(\w+)\.(\w+)")


def _random_hint(node: Any, detail: str) -> str:
    """The sentence for a refused op that draws random numbers (``aten::randn_like``:
    not core ATen, so the edge dialect has no form of it), or ""."""
    import torch

    op = None
    if node is not None and randomness.is_random(node):
        op = fx_nodes.op_name(node.target)
    else:
        for name, overload in _ATEN_OP.findall(detail):
            packet = getattr(torch.ops.aten, name, None)
            target = getattr(packet, overload, None) if packet is not None else None
            if target is not None and torch.Tag.nondeterministic_seeded in getattr(target, "tags", ()):
                op = fx_nodes.op_name(target)
                break
    if op is None:
        return ""
    return (
        f"`{op}` draws random numbers, and ExecuTorch's edge dialect has no form of it (it is not a core ATen op): "
        "draw the numbers outside the program and pass them in as an input, or draw none when the model is not "
        "training (`if self.training:`; in eval mode a VAE returns its mean). "
    )


def _lines_of_ops_named(text: str, program: Any, subject: Subject) -> list[SourceLine]:
    """The lines of the nodes whose op ``text`` names (``Missing out variants: {'mylib::weird'}``)."""
    seen: dict[tuple[str, int], SourceLine] = {}
    for node in program.graph_module.graph.nodes:
        if node.op != "call_function" or not hasattr(node.target, "_schema"):
            continue
        op = fx_nodes.op_name(node.target)
        if f"'{op}'" in text or f"`{op}`" in text or f"{op}." in text:
            where = subject.line_of(node)
            if where is not None:
                seen.setdefault((where.path or "", where.line), where)
    return list(seen.values())
