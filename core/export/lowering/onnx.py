"""Lowering to ONNX: convert the exported program, check it, run it in onnxruntime.

``torch.onnx.export(ep, dynamo=True)`` (the program carries the target's dynamic
shapes, so the ONNX inputs keep their symbolic dims), ``onnx.checker.check_model``,
then an onnxruntime session run on the example inputs, whose outputs
``destination.lower_to`` compares with eager. Its own findings:

- ``lowering/onnx-unsupported``: an op with no translation, at every line of the
  model file that produced a node of that op (the node's ``stack_trace``), naming it;
- ``lowering/onnx-error``: any other conversion, checker or runtime failure, at the
  failing node's line when one is known, else the target's (and the one message that
  the ``onnx`` extra is not installed, said by ``destination``).

A file may give torch.onnx translations for its own ops as a module global
``custom_translation_table`` (torch.onnx.export's argument of that name: op ->
onnxscript function). Runs in the job process only (torch, onnx).
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from exportlens.core.export.loader import Loaded
from exportlens.core.export.lowering import fx_nodes
from exportlens.core.export.lowering.destination import Lowered, Stop, Subject, quiet
from exportlens.core.export.weights import values_real
from exportlens.core.model.lowering import ONNX_INSTALL, ONNX_PACKAGES, Lowering, LoweringStatus
from exportlens.core.model.results import Diagnostic
from exportlens.core.model.signature import SourceLine

# The module global a model file may set: {op: onnxscript function}, as torch.onnx takes it.
TRANSLATIONS_GLOBAL = "custom_translation_table"
# torch.onnx logs a warning per optional package it lacks (torchvision) and warns about
# its own deprecations: none of it is the user's business.
_NOISY = ("torch.onnx",)


class Onnx:
    format = "onnx"
    title = "ONNX"
    runtime = "onnxruntime"
    product = "converted model"
    packages = ONNX_PACKAGES
    install = ONNX_INSTALL

    def lower(self, subject: Subject, versions: str) -> Lowered:
        record = Lowering("onnx", "error", versions=versions)
        if not values_real(subject.built):
            # The weights policy was asked for real ones and said why they cannot be had:
            # an ONNX model holds its weights' values, and its run compares them.
            why = subject.built.weights_note or "the model was built with fake weights"
            message = f"lowering to ONNX was not done: {why}"
            return Lowered(replace(record, status="not-run", skipped=why, errors=(message,)), [_error(message, subject)])
        try:
            with quiet(*_NOISY):
                program = _convert(subject.ep, subject.loaded)
        except Exception as e:  # noqa: BLE001 - every conversion failure is a finding
            constants = _constant_outputs(subject) if any("node return" in str(c) for c in fx_nodes.chain(e)) else []
            if constants:
                return Lowered(replace(record, status="error"), constants)
            status, found = _conversion_failure(e, subject)
            return Lowered(replace(record, status=status), found)
        try:
            proto = program.model_proto
            record = replace(record, opset=_opset(proto), nodes=len(proto.graph.node))
            import onnx

            onnx.checker.check_model(proto, full_check=True)
        except Exception as e:  # noqa: BLE001
            return Lowered(record, [_error(f"onnx.checker rejects the converted model: {fx_nodes.text(e)}", subject)])
        if subject.keep:
            with contextlib.suppress(Exception):  # over 2 GB: protobuf cannot; the record still stands
                record = replace(record, model=proto.SerializeToString())
        names = tuple(str(v.name) for v in program.model.graph.outputs)
        return Lowered(record, [], program, names)

    def run(self, lowered: Lowered, subject: Subject) -> list[Any]:
        try:
            with quiet(*_NOISY):
                return _run_onnxruntime(lowered.program, subject)
        except Exception as e:  # noqa: BLE001
            raise Stop("error", [_error(f"onnxruntime failed to run the converted model on the example inputs: {fx_nodes.text(e)}", subject)]) from e


def _convert(ep: Any, loaded: Loaded) -> Any:
    import torch

    table = getattr(loaded.module, TRANSLATIONS_GLOBAL, None)
    return torch.onnx.export(ep, dynamo=True, verbose=False, report=False, custom_translation_table=table if isinstance(table, dict) else None)


def _opset(proto: Any) -> int | None:
    return next((int(o.version) for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)


def _run_onnxruntime(program: Any, subject: Subject) -> list[Any]:
    import onnxruntime as ort
    import torch
    from torch.utils import _pytree as pytree

    def session(model: str | bytes) -> Any:
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, torch.get_num_threads())  # the job's share of the cores
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only
        return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])

    program.initialize_inference_session(session)
    built = subject.built
    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), (built.args, built.kwargs or {}))
    flat, _ = subject.ep._get_flat_args_with_check(args, kwargs)
    return list(program(*flat))


def _constant_outputs(subject: Subject) -> list[Diagnostic]:
    """torch.onnx (2.13) fails on a program that returns a constant number (``return x,
    7``: ``'int' object has no attribute 'name'`` translating the ``return``): an ONNX
    graph's outputs are values it computes. One error at the ``return`` line, naming
    the outputs; ``None`` converts (it is dropped)."""
    from exportlens.core.export.lowering.outputs import user_outputs

    constants = [o for o in user_outputs(subject.ep) if o.kind == "constant" and o.value is not None]
    if not constants:
        return []
    specs = [s for s in subject.signature.outputs if s.kind == "USER_OUTPUT"] if subject.signature else []
    where = next((specs[o.position].source for o in constants if o.position < len(specs) and specs[o.position].source), None)
    named = ", ".join(f"{o.name} (`{o.value!r}`)" for o in constants)
    message = (
        f"torch.onnx cannot convert a program that returns a constant number: {named}. An ONNX graph's outputs are values "
        f"it computes; return the number outside the exported program, or as a tensor (`torch.tensor({constants[0].value!r})`)"
    )
    return [_error(message, subject, where)]


def _conversion_failure(e: BaseException, subject: Subject) -> tuple[LoweringStatus, list[Diagnostic]]:
    chain = fx_nodes.chain(e)
    node = fx_nodes.failing_node(chain)
    dispatch = next((c for c in chain if type(c).__name__ == "DispatchError"), None)
    if dispatch is not None and node is not None:
        op = fx_nodes.op_name(node.target)
        # Every call of the op in the program fails the same way: show each line, as
        # draft_export shows every problem where export stops at the first.
        same = [n for n in subject.ep.graph.nodes if n.op == "call_function" and fx_nodes.op_name(n.target) == op] or [node]
        wheres: dict[int, SourceLine] = {}
        for n in [node, *same]:
            where = subject.line_of(n)
            if where is not None:
                wheres.setdefault(where.line, where)
        hint = (
            f"torch.onnx has no translation for `{op}`, so the exported program cannot be lowered to ONNX. "
            f"Give it one: set `{TRANSLATIONS_GLOBAL} = {{{fx_nodes.op_expression(node.target)}: onnx_function}}` in this file "
            "(an onnxscript function, as torch.onnx.export's argument of that name takes it), or decompose the op into aten ops"
        )
        targets = list(wheres.values()) or [subject.candidate.where]
        return "unsupported", [Diagnostic.at("lowering/onnx-unsupported", hint, where, subject.name) for where in targets]
    where = subject.line_of(node) if node is not None else None
    detail = fx_nodes.text(chain[-1])
    at_node = f" while translating node `{node.name}` ({fx_nodes.op_name(node.target)})" if node is not None else ""
    return "error", [_error(f"torch.onnx could not convert the exported program{at_node}: {detail}", subject, where)]


def _error(message: str, subject: Subject, where: SourceLine | None = None) -> Diagnostic:
    return Diagnostic.at("lowering/onnx-error", message, where or subject.candidate.where, subject.name)
