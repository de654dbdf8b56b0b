"""Lower an exported program to ONNX, check it, run it, compare: the step users export for.

A program that exports can still fail where it is deployed: an op with no ONNX
translation, a model the checker rejects, numbers that differ in the runtime. With
``lower = ["onnx"]`` the job does, right after a successful export and inside the same
job process (so under the same timeout and memory cap): ``torch.onnx.export(ep,
dynamo=True)`` (the program carries the target's dynamic shapes, so the ONNX inputs
keep their symbolic dims), ``onnx.checker.check_model``, an onnxruntime session run
on the example inputs, and a comparison with the eager outputs
(``exportlens.core.export.numerics``). Its findings are diagnostics at the user's
lines:

- ``lowering/onnx-unsupported``: an op with no translation, at every line of the
  model file that produced a node of that op (the node's ``stack_trace``), naming it;
- ``lowering/onnx-error``: any other conversion, checker or runtime failure, at the
  failing node's line when one is known, else the target's; also the one message
  that the ``onnx`` extra is not installed, with the ``pip install`` command;
- ``lowering/onnx-mismatch``: the outputs that differ beyond tolerance, with the max
  absolute and relative error of each, at the line of the ``return`` that produced them.

A file may give torch.onnx translations for its own ops as a module global
``custom_translation_table`` (torch.onnx.export's argument of that name: op ->
onnxscript function). Runs in the job process only (torch, onnx).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import re
import time
import warnings
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from exportlens.core.export.loader import Loaded
from exportlens.core.export.numerics import compare
from exportlens.core.export.targets import Built, Candidate
from exportlens.core.model.lowering import ONNX_INSTALL, ONNX_PACKAGES, Lowering, OutputComparison
from exportlens.core.model.results import Diagnostic, TargetResult
from exportlens.core.model.signature import Signature, SourceLine
from exportlens.core.source.frames import frames_in_text, same_file
from exportlens.core.source.spans import statement_at

# The module global a model file may set: {op: onnxscript function}, as torch.onnx takes it.
TRANSLATIONS_GLOBAL = "custom_translation_table"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MESSAGE_MAX = 1200  # characters of torch.onnx's message kept in a diagnostic

# The job process is one per file: the missing extra is said once, not once per target.
_missing_said = False


def lower_target(
    formats: tuple[str, ...], keep: bool, result: TargetResult, found: list[Diagnostic], ep: Any, built: Built, candidate: Candidate, loaded: Loaded
) -> tuple[TargetResult, list[Diagnostic]]:
    """``result`` with its lowering recorded, ``found`` with the lowering's diagnostics."""
    if "onnx" not in formats or result.status != "ok":
        return result, found
    lowering, more = lower_onnx(ep, built, candidate, loaded, result.signature, keep=keep)
    return replace(result, lowering=lowering), found + more


def lower_onnx(ep: Any, built: Built, candidate: Candidate, loaded: Loaded, signature: Signature | None, *, keep: bool = False) -> tuple[Lowering, list[Diagnostic]]:
    global _missing_said
    started = time.perf_counter()
    name = candidate.decl.name

    def ms() -> float:
        return (time.perf_counter() - started) * 1000

    missing = missing_packages()
    if missing:
        found = []
        if not _missing_said:
            _missing_said = True
            what = ", ".join(f"`{m}`" for m in missing)
            found.append(Diagnostic.at("lowering/onnx-error", f"lowering to ONNX needs {what}, which cannot be imported here: run `{ONNX_INSTALL}` in this environment", candidate.where, name))
        return Lowering("onnx", "unavailable", ms()), found

    versions = ", ".join(f"{p} {getattr(importlib.import_module(p), '__version__', '?')}" for p in ONNX_PACKAGES)
    record = Lowering("onnx", "error", versions=versions)
    try:
        expected = _eager_outputs(built)
    except Exception as e:  # noqa: BLE001 - the export ran it fake; running it for real may still fail
        return replace(record, lower_ms=ms()), [_error(f"running the model eagerly on the example inputs, to compare with onnxruntime, raised {_text(e)}", candidate, name)]

    try:
        with _quiet():
            program = _convert(ep, loaded)
    except Exception as e:  # noqa: BLE001 - every conversion failure is a finding
        status, found = _conversion_failure(e, ep, candidate, loaded)
        return replace(record, status=status, lower_ms=ms()), found

    try:
        proto = program.model_proto
        record = replace(record, opset=_opset(proto), nodes=len(proto.graph.node))
        import onnx

        onnx.checker.check_model(proto, full_check=True)
    except Exception as e:  # noqa: BLE001
        return replace(record, lower_ms=ms()), [_error(f"onnx.checker rejects the converted model: {_text(e)}", candidate, name)]

    try:
        with _quiet():
            actual = _run_onnxruntime(program, ep, built)
    except Exception as e:  # noqa: BLE001
        return replace(record, lower_ms=ms()), [_error(f"onnxruntime failed to run the converted model on the example inputs: {_text(e)}", candidate, name)]

    outputs = _compare(program, actual, expected, signature)
    ok = all(o.ok for o in outputs)
    model = b""
    if keep:
        with contextlib.suppress(Exception):  # over 2 GB: protobuf cannot; the record still stands
            model = proto.SerializeToString()
    record = replace(record, status="ok" if ok else "mismatch", outputs=outputs, model=model, lower_ms=ms())
    return record, [] if ok else _mismatch_diagnostics(outputs, signature, candidate)


def missing_packages() -> list[str]:
    """The packages of the ``onnx`` extra that do not import (a broken install counts)."""
    missing = []
    for package in ONNX_PACKAGES:
        try:
            importlib.import_module(package)
        except ImportError:
            missing.append(package)
    return missing


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """torch.onnx logs a warning per optional package it lacks (torchvision) and warns
    about its own deprecations: none of it is the user's business."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _convert(ep: Any, loaded: Loaded) -> Any:
    import torch

    table = getattr(loaded.module, TRANSLATIONS_GLOBAL, None)
    return torch.onnx.export(ep, dynamo=True, verbose=False, report=False, custom_translation_table=table if isinstance(table, dict) else None)


def _opset(proto: Any) -> int | None:
    return next((int(o.version) for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)


def _eager_outputs(built: Built) -> list[Any]:
    """The model's outputs as leaves, run as plain PyTorch on copies of the example
    inputs, its buffers put back afterwards: the ONNX model's initializers are the
    program's state at export, which a mutating forward would otherwise move on."""
    import torch
    from torch.utils import _pytree as pytree

    buffers = {n: b.detach().clone() for n, b in built.module.named_buffers()}
    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), (built.args, built.kwargs or {}))
    try:
        with torch.no_grad():
            out = built.module(*args, **kwargs)
    finally:
        with torch.no_grad():
            for n, b in built.module.named_buffers():
                if n in buffers:
                    b.copy_(buffers[n])
    return [leaf.detach() if isinstance(leaf, torch.Tensor) else leaf for leaf in pytree.tree_leaves(out)]


def _run_onnxruntime(program: Any, ep: Any, built: Built) -> list[Any]:
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
    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), (built.args, built.kwargs or {}))
    flat, _ = ep._get_flat_args_with_check(args, kwargs)
    return list(program(*flat))


def _compare(program: Any, actual: list[Any], expected: list[Any], signature: Signature | None) -> tuple[OutputComparison, ...]:
    """Each ONNX output against the eager leaf of the user output it stands for (by
    the graph output's name, which the ONNX output keeps), else by position."""
    names = [str(v.name) for v in program.model.graph.outputs]
    users = [s.arg.name for s in signature.outputs if s.kind == "USER_OUTPUT"] if signature else []
    out = []
    for i, (name, value) in enumerate(zip(names, actual, strict=False)):
        j = users.index(name) if name in users else i
        if j < len(expected):
            out.append(compare(name, value, expected[j]))
    return tuple(out)


def _mismatch_diagnostics(outputs: tuple[OutputComparison, ...], signature: Signature | None, candidate: Candidate) -> list[Diagnostic]:
    """One diagnostic per ``return`` line, naming each output that differs there."""
    name = candidate.decl.name
    sources = {s.arg.name: s.source for s in signature.outputs} if signature else {}
    by_line: dict[tuple[int, int], tuple[SourceLine, list[str]]] = {}
    for o in outputs:
        if o.ok:
            continue
        where = sources.get(o.name) or candidate.where
        if not o.shape_ok:
            text = f"`{o.name}` ({o.dtype}) has another shape in onnxruntime than in eager PyTorch"
        else:
            text = f"`{o.name}` ({o.dtype}): max abs error {o.max_abs:.3g}, max rel error {o.max_rel:.3g} (tolerance: atol {o.atol:g} + rtol {o.rtol:g} × |eager|)"
        by_line.setdefault((where.line, where.column), (where, []))[1].append(text)
    found = []
    for where, texts in by_line.values():
        head = "onnxruntime's output differs from eager PyTorch on the example inputs" if len(texts) == 1 else "onnxruntime's outputs differ from eager PyTorch on the example inputs"
        found.append(Diagnostic.at("lowering/onnx-mismatch", head + ":\n" + "\n".join(texts), where, name))
    return found


# -- conversion failures -----------------------------------------------------------


def _chain(e: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    current: BaseException | None = e
    while current is not None and current not in out and len(out) < 32:
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def _failing_node(chain: list[BaseException]) -> Any:
    """The fx node torch.onnx was translating when it failed: the ``node`` local of the
    innermost translation frame (its error names the node only in text)."""
    import torch

    found = None
    for e in chain:
        tb = e.__traceback__
        while tb is not None:
            node = tb.tb_frame.f_locals.get("node")
            if isinstance(node, torch.fx.Node) and node.op == "call_function":
                found = node
            tb = tb.tb_next
        if found is not None:
            return found
    return None


def _node_line(node: Any, loaded: Loaded) -> SourceLine | None:
    """The statement in the model file that made ``node`` (the deepest such frame)."""
    trace = node.meta.get("stack_trace") if node is not None else None
    if not isinstance(trace, str):
        return None
    lines = [line for file, line, _ in frames_in_text(trace) if same_file(file, loaded.path)]
    return statement_at(loaded.index, lines[-1]) if lines else None


def _op_name(target: Any) -> str:
    name = getattr(target, "_name", None) if hasattr(target, "_schema") else None  # an OpOverload: "mylib::weird"
    overload = getattr(target, "_overloadname", "")
    if isinstance(name, str):
        return name + (f".{overload}" if overload and overload != "default" else "")
    return str(target)


def _op_expression(target: Any) -> str:
    """How the user's code names an op: ``torch.ops.mylib.weird.default``."""
    return f"torch.ops.{target}" if hasattr(target, "_schema") else getattr(target, "__name__", str(target))


def _conversion_failure(e: BaseException, ep: Any, candidate: Candidate, loaded: Loaded) -> tuple[Any, list[Diagnostic]]:
    name = candidate.decl.name
    chain = _chain(e)
    node = _failing_node(chain)
    dispatch = next((c for c in chain if type(c).__name__ == "DispatchError"), None)
    if dispatch is not None and node is not None:
        op = _op_name(node.target)
        # Every call of the op in the program fails the same way: show each line, as
        # draft_export shows every problem where export stops at the first.
        same = [n for n in ep.graph.nodes if n.op == "call_function" and _op_name(n.target) == op] or [node]
        wheres: dict[int, SourceLine] = {}
        for n in [node, *same]:
            where = _node_line(n, loaded)
            if where is not None:
                wheres.setdefault(where.line, where)
        hint = (
            f"torch.onnx has no translation for `{op}`, so the exported program cannot be lowered to ONNX. "
            f"Give it one: set `{TRANSLATIONS_GLOBAL} = {{{_op_expression(node.target)}: onnx_function}}` in this file "
            "(an onnxscript function, as torch.onnx.export's argument of that name takes it), or decompose the op into aten ops"
        )
        targets = list(wheres.values()) or [candidate.where]
        return "unsupported", [Diagnostic.at("lowering/onnx-unsupported", hint, where, name) for where in targets]
    where = _node_line(node, loaded) if node is not None else None
    deepest = chain[-1]
    detail = _text(deepest)
    at_node = f" while translating node `{node.name}` ({_op_name(node.target)})" if node is not None else ""
    return "error", [_error(f"torch.onnx could not convert the exported program{at_node}: {detail}", candidate, name, where)]


def _text(e: BaseException) -> str:
    message = _ANSI.sub("", str(e)).strip()
    if len(message) > _MESSAGE_MAX:
        message = message[:_MESSAGE_MAX] + " ..."
    return f"{type(e).__name__}: {message}" if message else type(e).__name__


def _error(message: str, candidate: Candidate, name: str, where: SourceLine | None = None) -> Diagnostic:
    return Diagnostic.at("lowering/onnx-error", message, where or candidate.where, name)
