"""One export job: run a model file, export each target it declares, analyse.

Why a target's export failed, at the user's lines, is ``explain.diagnose_failure``'s.

Runs in the disposable job process the worker forks: it imports torch and runs
the user's code. ``run_job`` streams ``TargetsFound``/``TargetBegins``/``TargetDone`` events so the
worker knows which target a crash or a hang belongs to, and returns the ``FileResult``.
"""

from __future__ import annotations

import inspect
import os
import time
import warnings
from dataclasses import replace
from typing import Any, Callable

from exportlens.core.export import (
    analyze,
    attributes,
    constant_updates,
    deps,
    libraries,
    library_units,
    program_run,
    signature_checks,
    training,
)
from exportlens.core.export.explain import diagnose_failure
from exportlens.core.export.loader import (
    Loaded,
    frames_of,
    load,
    looked_up,
    module_name_for,
    record_imports,
    sources_of,
)
from exportlens.core.export.targets import Built, Candidate, TargetError, discover
from exportlens.core.export.weights import Policy, RealWeightsNeeded, annotate, fallbacks
from exportlens.core.model.events import (
    JobEvent,
    LoweringState,
    Phase,
    TargetBegins,
    TargetDone,
    TargetExported,
    TargetsFound,
)
from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import Diagnostic, Fallback, FileResult, Related, TargetResult
from exportlens.core.model.signature import SourceLine
from exportlens.core.project.settings import DEFAULT_MEMORY_MB, find_pyproject, problem_message
from exportlens.core.project.settings import read as read_settings
from exportlens.core.source.project import UserSources
from exportlens.core.source.spans import complete_range
from exportlens.core.trace import mark

Emit = Callable[[JobEvent], None]


def run_job(request: ExportRequest, emit: Emit) -> FileResult:
    """Run in the job process only: it installs an audit hook that stays for the
    process's life (see ``exportlens.core.export.deps``)."""
    recorder = deps.start(request.root or module_name_for(request.path)[1], request.path)
    try:
        result = _run(request, emit, recorder)
    finally:
        deps.stop()
    return result


def _run(request: ExportRequest, emit: Emit, recorder: deps.Recorder) -> FileResult:
    started = time.perf_counter()
    from exportlens.core.export.registry import REGISTRY

    REGISTRY.clear()
    policy = Policy.for_request(request)
    emit(Phase(None, "running the file"))
    libraries.reset()
    libraries.unshadow([request.root, module_name_for(request.path)[1]])
    with policy.constructing(), libraries.watching(request.root or module_name_for(request.path)[1]):
        loaded = load(request.path, request.source, request.root, request.overlays)
    mark("job: model file run")
    if loaded.error is not None:
        try:
            note = policy.after_failure(loaded.error, _where(loaded.error, sources_of(loaded)))
        except RealWeightsNeeded as e:
            return FileResult(path=request.path, fallbacks=(Fallback(None, e.reason),))
        loaded.diagnostics = [annotate(d, note) if d.code == "import-error" else d for d in loaded.diagnostics]
    sources = sources_of(loaded)
    diagnostics = list(loaded.diagnostics)
    results: list[TargetResult] = []
    needed: dict[str | None, str] = {}
    if loaded.module is not None:
        entries = list(request.pyproject_targets)
        if not entries:
            with recorder.paused():  # exportlens's reading, not the model's: in the first key
                entries, problem = _pyproject_declarations(request)
            if problem:
                diagnostics.append(problem)
        candidates = discover(loaded.module, loaded.index, strict_default=request.strict_default, pyproject_entries=entries, root=request.root)
        emit(TargetsFound(tuple(c.decl for c in candidates)))
        for candidate in candidates:
            if candidate.decl.name in request.skip:
                continue
            emit(TargetBegins(candidate.decl.name))

            def finish(found: list[Diagnostic] | tuple[Diagnostic, ...], candidate: Candidate = candidate) -> list[Diagnostic]:
                return [_back_to_target(complete_range(d, sources.index(d.path or loaded.path)), candidate, loaded.path) for d in found]

            def target_emit(event: JobEvent, finish: Callable[..., list[Diagnostic]] = finish) -> None:
                # What the worker keeps if the job dies while lowering is said as TargetDone says it.
                if isinstance(event, TargetExported):
                    event = replace(event, diagnostics=tuple(finish(event.diagnostics)))
                elif isinstance(event, LoweringState):
                    pending = finish([event.pending])[0] if event.pending is not None else None
                    event = replace(event, diagnostics=tuple(finish(event.diagnostics)), pending=pending)
                emit(event)

            try:
                result, found = export_target(candidate, loaded, sources, lower=request.lower, keep_lowered=request.keep_lowered, policy=policy, emit=target_emit, memory_budget=request.memory_budget)
            except RealWeightsNeeded as e:  # the worker runs it again with real weights
                needed[candidate.decl.name] = e.reason
                continue
            except Exception as e:  # noqa: BLE001 - a bug of ours must not lose the other targets
                result = TargetResult(candidate.decl.name, candidate.decl.line, "error")
                found = [Diagnostic.at("export-error", f"exportlens failed to analyse this target ({type(e).__name__}: {e}); please report it", candidate.where, candidate.decl.name)]
            found = finish(found)
            emit(TargetDone(result, tuple(found)))
            results.append(result)
            diagnostics.extend(found)
    else:
        emit(TargetsFound(()))
    # After the exports: building and exporting a target may import and read more.
    for name in libraries.preloaded_used():
        looked_up(name, loaded.root)
    inputs, written = recorder.result(request.path, record_imports(loaded) if loaded.root else {})
    used = library_units.depended_on(loaded.root)
    return FileResult(
        path=request.path,
        diagnostics=tuple(complete_range(d, sources.index(d.path or loaded.path)) for d in diagnostics),
        targets=tuple(results),
        local_imports=tuple(inputs),
        local_import_hashes=tuple(inputs.values()),
        elapsed_ms=(time.perf_counter() - started) * 1000,
        written=tuple(written),
        written_hashes=tuple(written.values()),
        missing_modules=tuple(loaded.missing_modules),
        fallbacks=fallbacks(needed),
        libraries=tuple(used),
        library_states=tuple(used.values()),
    ).sorted()


def _pyproject_declarations(request: ExportRequest) -> tuple[list[str], Diagnostic | None]:
    """The nearest pyproject.toml's ``targets`` entries, and the diagnostic of its
    problem (it does not parse, its section is malformed), located in pyproject.toml."""
    pyproject = find_pyproject(request.path, request.root)
    if not pyproject:
        return [], None
    settings = read_settings(pyproject)
    message = problem_message(settings)
    if message is None:
        return list(settings.targets), None
    where = SourceLine(settings.problem_line, settings.problem_column, path=os.path.realpath(pyproject))
    return [], Diagnostic.at("target-error", message, where)


def _back_to_target(d: Diagnostic, candidate: Candidate, path: str) -> Diagnostic:
    """A diagnostic in a local module names, as related information, the target
    whose export found it: the module alone does not say which target ran it. (Not a
    target declared in another file, pyproject.toml: it has no line here.)"""
    if d.path is None or candidate.where.path is not None:
        return d
    note = Related(os.path.realpath(path), candidate.where.line, f"found exporting target `{candidate.decl.name}`", candidate.where.column)
    return replace(d, related=(*d.related, note))


def _where(e: BaseException, sources: UserSources) -> str | None:
    """``file.py:N``: the user's line ``e`` was raised at, for messages."""
    frame = sources.deepest(frames_of(e))
    return f"{os.path.basename(frame.file)}:{frame.line}" if frame else None


def _build(candidate: Candidate, loaded: Loaded, sources: UserSources, policy: Policy) -> Built | Diagnostic:
    """Build the target in the policy's window; raises ``RealWeightsNeeded`` when the
    build failed for want of values, or needs real weights (see ``Policy.inspect``)."""
    name = candidate.decl.name
    try:
        with policy.constructing(), libraries.watching(loaded.root):
            built = candidate.build()
        libraries.note_classes(built.module)
    except TargetError as e:
        cause = e.cause or e
        return annotate(Diagnostic.at("target-error", f"target `{name}`: {e}", candidate.where, name), policy.after_failure(cause, _where(cause, sources)))
    except BaseException as e:  # noqa: BLE001 - any failure of user code is a finding
        note = policy.after_failure(e, _where(e, sources))
        frame = sources.deepest(frames_of(e))
        where = sources.statement(frame) if frame else candidate.where
        detail = str(e).strip()
        found = Diagnostic.at(
            "target-error",
            f"building target `{name}` raised {type(e).__name__}" + (f": {detail}" if detail else "") + analyze.build_advice(detail),
            where,
            name,
        )
        return annotate(found, note)
    return policy.inspect(built)


def export_target(
    candidate: Candidate,
    loaded: Loaded,
    sources: UserSources | None = None,
    *,
    lower: tuple[str, ...] = (),
    keep_lowered: tuple[str, ...] = (),
    policy: Policy | None = None,
    emit: Emit | None = None,
    on_program: Callable[[Any, Built], None] | None = None,
    memory_budget: int | None = None,
) -> tuple[TargetResult, list[Diagnostic]]:
    """Build, export and analyse one target. Raises ``RealWeightsNeeded`` when the
    policy wants it run again with real weights. ``on_program`` sees the exported
    program and what it was made from, when the export succeeded (a fix's
    verification runs it, ``core/export/verify``). ``memory_budget``: the project's
    budget for the memory a lowered program needs, in bytes (a target's own wins)."""
    import torch

    sources = sources or sources_of(loaded)
    policy = policy or Policy("real", DEFAULT_MEMORY_MB)
    name, line = candidate.decl.name, candidate.decl.line

    def phase(text: str) -> None:
        if emit is not None:
            emit(Phase(name, f"{text} (real weights)" if policy.why_real else text))

    phase("building the model")
    built = _build(candidate, loaded, sources, policy)
    mark(f"job: {name} built")
    if isinstance(built, Diagnostic):
        return TargetResult(name, line, "error"), [built]
    weights, weights_note = policy.describe(built)

    started = time.perf_counter()
    failure: BaseException | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            phase("tracing")
            traced = torch.export.export(built.module, built.args, built.kwargs, dynamic_shapes=built.dynamic_shapes, strict=built.strict)
            phase("decompositions")
            ep = traced.run_decompositions({})
        except BaseException as e:  # noqa: BLE001 - SystemExit in forward too
            failure = e
    export_ms = (time.perf_counter() - started) * 1000
    mark(f"job: {name} exported")
    warning_texts = [str(w.message) for w in caught]

    if failure is not None:
        phase("analysing the failure")
        found = diagnose_failure(failure, built, candidate, loaded, sources, policy)
        dropped = attributes.tensor_attribute_diagnostics(warning_texts, built.module, sources, name, candidate.where)
        found += constant_updates.without_contradictions(found, dropped)
        result = TargetResult(name, line, "error", export_ms, module_class=_class_line(type(built.module), sources), weights=weights, weights_note=built.weights_note or weights_note)
        return result, found

    from exportlens.core.export.extract import extract_signature, graph_text

    signature = extract_signature(ep, built.module, index=loaded.index, args=built.args, kwargs=built.kwargs, sources=sources)
    mark(f"job: {name} signature extracted")
    found = signature_checks.mutation_diagnostics(signature, name, candidate.where)
    found += attributes.tensor_attribute_diagnostics(warning_texts, built.module, sources, name, candidate.where)
    output_node = next(n for n in ep.graph.nodes if n.op == "output")
    found += signature_checks.signature_diagnostics(
        signature,
        placeholders=[n.name for n in ep.graph.nodes if n.op == "placeholder"],
        graph_outputs=[a.name for a in output_node.args[0] if isinstance(a, torch.fx.Node)],
        parameters=[n for n, _ in built.module.named_parameters(remove_duplicate=False)],
        buffers=[n for n, _ in built.module.named_buffers(remove_duplicate=False)],
        constants=list(ep.constants),
        target=name,
        fallback=candidate.where,
    )
    module_class = _class_line(type(built.module), sources)
    try:
        # At the ``model = ...`` that makes the module (where ``.eval()`` goes), else the declaration.
        made = loaded.index.global_assignments.get("model") if candidate.decl.form == "globals" else None
        in_training, said = training.check(ep, built.module, loaded.index, sources, name, made or candidate.where)
    except Exception:  # noqa: BLE001 - a module tree that refuses to be walked: no warning, no loss
        in_training, said = "", []
    found += said
    run, failed = program_run.check(ep, built, candidate, sources)
    found += failed
    if on_program is not None:
        on_program(ep, built)
    mark(f"job: {name} run on its example inputs: {run.status}")
    graph = graph_text(ep)
    mark(f"job: {name} checked, graph text")
    result = TargetResult(name, line, "ok", export_ms, signature, graph, _program_bytes(ep, found), module_class=module_class, weights=weights, weights_note=weights_note, run=run)
    mark(f"job: {name} program encoded")
    if lower:  # after the export, in the same job: the same timeout and memory cap
        from exportlens.core.export.lowering import lower_target, values_needed

        why = values_needed(lower, keep_lowered)  # ExecuTorch alone lowers fake weights as far as it can
        if why:
            built.weights_note = policy.require_values(built, why) or ""
            result = replace(result, weights_note=built.weights_note or weights_note)
        if emit is not None:  # final now: a job that dies while lowering keeps it (``core/isolation/attempts``)
            emit(TargetExported(result, tuple(found)))

        def state(lowerings: tuple[Any, ...], more: list[Diagnostic], pending: Diagnostic | None, decided: bool) -> None:
            if emit is not None:
                emit(LoweringState(name, lowerings, tuple(more), pending, decided))

        budget = built.memory_budget if built.memory_budget is not None else memory_budget
        return lower_target(lower, keep_lowered, result, found, ep, built, candidate, loaded, sources, phase, in_training, state, policy.memory_mb, budget)
    return result, found


def _class_line(cls: type, sources: UserSources) -> SourceLine | None:
    """The ``class`` line of ``cls`` in whichever of the user's files defines it."""
    try:
        file = inspect.getsourcefile(cls)
    except (TypeError, OSError):
        return None
    if not file or not sources.is_user(file):
        return None
    info = sources.index(file).classes.get(getattr(cls, "__qualname__", cls.__name__).replace(".<locals>", ""))
    return info.where if info is not None else None


def _program_bytes(ep: Any, found: list[Diagnostic]) -> bytes:
    """The program as msgpack, or nothing when it holds what the schema cannot store
    (say, an exotic node value): the export itself still counts as ok."""
    from exportlens.core.serde.encode import to_bytes

    try:
        return to_bytes(ep, diagnostics=tuple(found))
    except Exception:  # noqa: BLE001 - a missing program must never fail the export
        return b""


def default_request(path: str, **kw: Any) -> ExportRequest:
    return ExportRequest(id=0, path=os.path.abspath(path), **kw)
