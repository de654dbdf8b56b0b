"""Lowering an exported program to where it is deployed: the step users export for.

A program that exports can still fail there: an op with no translation, a model the
checker rejects, numbers that differ in the runtime. With ``lower = [...]`` the job
does, right after a successful export and inside the same job process (so under the
same timeout and memory cap), for each requested destination: lower the program,
run it on the example inputs, compare with the eager outputs. Its findings are
diagnostics at the user's lines (``lowering/<format>-*``) and a ``Lowering`` record
per destination on the target's result.

- ``destination.py``: the interface (lower, run) and the run every destination shares;
- ``outputs.py`` + ``numerics.py``: the comparison with eager, shared;
- ``fx_nodes.py``: from a failure or an fx node to the user's line, shared;
- one module per destination: ``onnx.py``, ``executorch.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from exportlens.core.export.loader import Loaded
from exportlens.core.export.lowering.destination import Destination, Subject, lower_to
from exportlens.core.export.targets import Built, Candidate
from exportlens.core.model.lowering import TITLES, Lowering
from exportlens.core.model.results import Diagnostic, TargetResult
from exportlens.core.source.project import UserSources

# Hears how far a target's lowering came (``core/model/events.LoweringState``): the
# records so far (the last in progress), their findings, the diagnostic for a death in
# the step in progress, and whether it stands where that step's size is decided.
State = Callable[[tuple[Lowering, ...], list[Diagnostic], Diagnostic | None, bool], None]


def destination(format: str) -> Destination:
    """The destination of a format of ``LOWER_FORMATS`` (its module is imported here:
    a job that lowers nothing imports none)."""
    if format == "onnx":
        from exportlens.core.export.lowering.onnx import Onnx

        return Onnx()
    if format == "executorch":
        from exportlens.core.export.lowering.executorch import Executorch

        return Executorch()
    raise ValueError(f"no lowering destination {format!r}")


def values_needed(formats: tuple[str, ...], keep: tuple[str, ...]) -> str | None:
    """Why lowering to ``formats`` needs the weights' values (the job asks the weights
    policy for real ones), or None: ONNX's initializers and run need them; ExecuTorch
    makes its edge program and XNNPACK partition without, and needs them only to build
    the .pte that ``--save-pte`` keeps (with fake weights it says the run was skipped)."""
    if "onnx" in formats:
        return "lowering to ONNX runs the program on its weights to compare it with eager PyTorch"
    if "executorch" in keep:
        return "saving the ExecuTorch program (--save-pte) needs the weights' values"
    return None


def phase(format: str) -> str:
    """What progress says while a target lowers: ``lowering: executorch``."""
    return f"lowering: {format}"


def lower_target(
    formats: tuple[str, ...],
    keep: tuple[str, ...],
    result: TargetResult,
    found: list[Diagnostic],
    ep: Any,
    built: Built,
    candidate: Candidate,
    loaded: Loaded,
    sources: UserSources,
    on_phase: Callable[[str], None] | None = None,
    training: str = "",
    on_state: State | None = None,
    memory_mb: int | None = None,
    budget: int | None = None,
) -> tuple[TargetResult, list[Diagnostic]]:
    """``result`` with a lowering recorded per format, in order, and ``found`` with their
    diagnostics; ``keep``: the formats whose lowered program rides along;
    ``on_phase`` hears each format begin (the progress the editor shows); ``training``:
    the layers found in training mode (``Subject.training``); ``on_state`` hears how
    far lowering came before each step that may kill the job (the worker keeps it,
    ``LoweringState``); ``memory_mb``: the job's memory cap; ``budget``: the most
    memory a lowered program may need to run, in bytes. An exception of exportlens's
    own is that format's ``error``, never the loss of the export."""
    if not formats or result.status != "ok":
        return result, found
    lowerings: list[Lowering] = []
    lowered_found: list[Diagnostic] = []
    for format in formats:
        if on_phase is not None:
            on_phase(phase(format))

        def report(record: Lowering, more: list[Diagnostic], pending: Diagnostic | None, decided: bool = False) -> None:
            # Without the lowered program's bytes (``--save-pte``): the worker needs the counts, not a copy per step.
            if on_state is not None:
                on_state((*(replace(low, model=b"") for low in lowerings), replace(record, model=b"")), lowered_found + more, pending, decided)

        subject = Subject(ep, built, candidate, loaded, sources, result.signature, keep=format in keep, training=training, memory_mb=memory_mb, budget=budget, report=report)
        try:
            pending = Diagnostic.at(f"lowering/{format}-error", f"while lowering the exported program to {TITLES.get(format, format)}", candidate.where, candidate.decl.name)
            report(Lowering(format, "error"), [], pending)
            lowering, more = lower_to(destination(format), subject)
        except Exception as e:  # noqa: BLE001 - a bug of ours: the export stands, the lowering says what happened
            lowering, more = internal_error(format, e, candidate)
        lowerings.append(lowering)
        lowered_found.extend(more)
    return replace(result, lowerings=tuple(lowerings)), found + lowered_found


def internal_error(format: str, e: BaseException, candidate: Candidate) -> tuple[Lowering, list[Diagnostic]]:
    """exportlens's own code raised while lowering: the lowering's status is ``error``,
    its one diagnostic says it is exportlens's bug; the target's export is untouched."""
    import traceback

    frame = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ is not None else None
    place = f" at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}" if frame is not None else ""
    what = f"exportlens failed while lowering to {TITLES.get(format, format)} ({type(e).__name__}: {e}{place}); the export itself is fine; please report it"
    record = Lowering(format, "error", errors=(what,))
    return record, [Diagnostic.at(f"lowering/{format}-error", what, candidate.where, candidate.decl.name)]
