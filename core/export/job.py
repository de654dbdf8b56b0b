"""One export job: run a model file, export each target it declares, analyse.

Runs in the disposable job process the worker forks: it imports torch and runs
the user's code. ``run_job`` streams ``TargetsFound``/``TargetBegins``/``TargetDone`` events so the
worker knows which target a crash or a hang belongs to, and returns the ``FileResult``.
"""

from __future__ import annotations

import importlib.util
import inspect
import linecache
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
    dim_ranges,
    libraries,
    library_units,
    program_run,
    shapes_spec,
    signature_checks,
    training,
)
from exportlens.core.export.analyze import ErrorFacts
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
from exportlens.core.export.weights import Policy, RealWeightsNeeded, annotate, fake_explains, fallbacks, values_real
from exportlens.core.isolation.messages import ExportRequest, FromJob, Phase, TargetBegins, TargetDone, TargetsFound
from exportlens.core.isolation.trace import mark
from exportlens.core.model.results import Diagnostic, Fallback, FileResult, Related, TargetResult
from exportlens.core.model.signature import SourceLine
from exportlens.core.project.settings import DEFAULT_MEMORY_MB, find_pyproject, problem_message
from exportlens.core.project.settings import read as read_settings
from exportlens.core.source.frames import Frame
from exportlens.core.source.project import Sources
from exportlens.core.source.sourcemap import SourceIndex
from exportlens.core.source.spans import complete_range, statement_at

Emit = Callable[[FromJob], None]


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
            try:
                result, found = export_target(candidate, loaded, sources, lower=request.lower, keep_lowered=request.keep_lowered, policy=policy, emit=emit)
            except RealWeightsNeeded as e:  # the worker runs it again with real weights
                needed[candidate.decl.name] = e.reason
                continue
            except Exception as e:  # noqa: BLE001 - a bug of ours must not lose the other targets
                result = TargetResult(candidate.decl.name, candidate.decl.line, "error")
                found = [Diagnostic.at("export-error", f"exportlens failed to analyse this target ({type(e).__name__}: {e}); please report it", candidate.where, candidate.decl.name)]
            found = [_back_to_target(complete_range(d, sources.index(d.path or loaded.path)), candidate, loaded.path) for d in found]
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


def _where(e: BaseException, sources: Sources) -> str | None:
    """``file.py:N``: the user's line ``e`` was raised at, for messages."""
    frame = sources.deepest(frames_of(e))
    return f"{os.path.basename(frame.file)}:{frame.line}" if frame else None


def _facts(e: BaseException) -> ErrorFacts:
    error_type = getattr(getattr(e, "error_type", None), "name", None)
    return ErrorFacts(
        type_names=tuple(c.__name__ for c in type(e).__mro__),
        message=str(e),
        frames=tuple(frames_of(e)),
        error_type=error_type,
    )


def _build(candidate: Candidate, loaded: Loaded, sources: Sources, policy: Policy) -> Built | Diagnostic:
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
    sources: Sources | None = None,
    *,
    lower: tuple[str, ...] = (),
    keep_lowered: tuple[str, ...] = (),
    policy: Policy | None = None,
    emit: Emit | None = None,
) -> tuple[TargetResult, list[Diagnostic]]:
    """Build, export and analyse one target. Raises ``RealWeightsNeeded`` when the
    policy wants it run again with real weights."""
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
        return lower_target(lower, keep_lowered, result, found, ep, built, candidate, loaded, sources, phase, in_training)
    return result, found


def _class_line(cls: type, sources: Sources) -> SourceLine | None:
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


def diagnose_failure(
    failure: BaseException, built: Built, candidate: Candidate, loaded: Loaded, sources: Sources | None = None, policy: Policy | None = None
) -> list[Diagnostic]:
    name, path, index = candidate.decl.name, loaded.path, loaded.index
    sources = sources or sources_of(loaded)
    policy = policy or Policy("real", DEFAULT_MEMORY_MB)
    facts = _facts(failure)
    code = analyze.classify(facts)

    if shapes_spec.malformed(facts):
        # torch's own check, before tracing: no user frame; the declaration is the line.
        declared = shapes_spec.declaration(index, _extent(candidate, index)) or candidate.where
        return [Diagnostic.at(code, analyze.message_for(code, facts, name), declared, name)]
    if code == "data-dependent":
        collected = _data_dependent(built, sources, name, policy)
        if collected:
            return collected
    if code == "constraint-violation":
        outside = _example_outside_its_range(failure, built, candidate, index)
        if outside:
            return outside
        where, related = analyze.constraint_location(facts, index, path, sources, _extent(candidate, index))
        related = _specialisations(built, sources) + tuple(r for r in related if not r.message.startswith("the code"))
        if where is None and related:
            where = statement_at(sources.index(related[0].path), related[0].line)
        where = where or analyze.locate(facts, path, index, candidate.where, sources)
        return [Diagnostic.at(code, analyze.message_for(code, facts, name), where, name, related)]

    if code in {"export-error", "unsupported", "banned-mutation/parameter", "banned-mutation/input-metadata"}:
        # Run the model once as plain PyTorch: it tells a model that is simply
        # broken from one export rejects, and finds banned mutations' lines.
        from exportlens.core.export.mutations import run_eagerly

        # Raises RealWeightsNeeded where real weights fit; else the run is fake, and
        # what fake values cause is no finding.
        built.weights_note = policy.require_values(built, "the eager run that explains why the export failed needs the weights' values") or ""
        eager = run_eagerly(built.module, built.args, built.kwargs, path, sources)
        if eager.error is not None and fake_explains(built, eager.error):
            eager.error = None
        if constant_updates.failed_on_constant(facts.message):
            updated = constant_updates.diagnostics(eager.mutations, built.module, sources, name)
            if updated:
                return updated
        banned = [m for m in eager.mutations if m.frame is not None and m.kind != "tensor-attribute"]
        if banned:
            out = []
            for m in banned:
                mcode = f"banned-mutation/{m.kind}"
                mindex = sources.index(m.frame.file)  # type: ignore[union-attr]
                where = mindex.inplace_call_at(m.frame.line, m.op) or statement_at(mindex, m.frame.line)  # type: ignore[union-attr]
                what = f"input `{m.name}`" if m.kind == "input-metadata" else f"parameter `{m.name}`"
                out.append(Diagnostic.at(mcode, f"`{m.op}` on {what}: " + analyze.message_for(mcode, facts, name), where, name))
            return out
        if eager.error is not None and code != "banned-mutation/parameter":
            return [_eager_failure(eager.error, candidate, loaded, sources)]
        if code.startswith("banned-mutation/"):
            code = "export-error"
    elif analyze.is_eager_like(facts) and sources.deepest(facts.frames) is not None:
        code = "eager-error"
    elif code == "unsupported-type":
        returned = analyze.output_location(facts, index, candidate.module_class or type(built.module))
        if returned is not None and sources.deepest(facts.frames) is None:
            return [Diagnostic.at(code, analyze.message_for(code, facts, name), returned, name)]

    where = analyze.locate(facts, path, index, candidate.where, sources)
    statement = sources.index(where.path or path).line_text(where.line).strip() if where != candidate.where else None
    return [Diagnostic.at(code, analyze.message_for(code, facts, name, statement), where, name)]


def _example_outside_its_range(failure: BaseException, built: Built, candidate: Candidate, index: SourceIndex) -> list[Diagnostic]:
    """``2 not in range [4, 64]``: at the ``Dim`` whose range the example misses (see
    ``dim_ranges``); nothing when the message is another violation."""
    found = dim_ranges.outside(built.module, built.args, built.kwargs, built.dynamic_shapes, str(failure))
    return dim_ranges.diagnose(found, candidate, index, _extent(candidate, index)) if found else []


def _eager_failure(error: BaseException, candidate: Candidate, loaded: Loaded, sources: Sources) -> Diagnostic:
    """The model fails without export too (its one eager run raised): an
    ``eager-error`` at the deepest line of the user's files -- the call into a library
    when the error is raised inside one, named with its place as related information
    -- else at the target's declaration."""
    facts = _facts(error)
    mine = sources.deepest(facts.frames)
    library = _library_frame(facts.frames, mine, sources)
    where = analyze.locate(facts, loaded.path, loaded.index, candidate.where, sources) if mine is not None else candidate.where
    library_line = linecache.getline(library.file, library.line).strip() if library is not None else ""
    message = analyze.eager_failure_message(candidate.decl.name, facts, library, library_line, called=mine is not None)
    related = (Related(os.path.realpath(library.file), library.line, f"raised here, in {analyze.library_place(library.file)}"),) if library is not None else ()
    return Diagnostic.at("eager-error", message, where, candidate.decl.name, related)


_CORE = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep  # exportlens.core


def _library_frame(frames: tuple[Frame, ...], mine: Frame | None, sources: Sources) -> Frame | None:
    """The innermost frame below the user's deepest one that is a library's own code:
    not the user's, not torch's (an op that raised is the caller's mistake, not
    torch's place to fix) and not exportlens's (the eager run's watch)."""
    below = list(frames)[list(frames).index(mine) + 1 :] if mine is not None else list(frames)
    torch_dir = os.path.dirname(os.path.realpath(importlib.util.find_spec("torch").origin or "")) + os.sep  # type: ignore[union-attr]
    for frame in reversed(below):
        real = os.path.realpath(frame.file)
        if sources.is_user(frame.file) or real.startswith((torch_dir, _CORE)) or not real.endswith(".py"):
            continue
        return frame
    return None


def _extent(candidate: Candidate, index: SourceIndex) -> tuple[int, int] | None:
    """The lines of the target's declaration, decorators included: where its own
    ``Dim``s are (None for the module-globals form, whose ``Dim``s are the file's)."""
    if candidate.decl.form == "globals":
        return None
    line = candidate.where.line
    spans = [(c.where.line, c.first_line, c.last_line) for c in index.classes.values()]
    spans += [(f.where.line, f.first_line, f.last_line) for f in index.all_functions()]
    return next(((first, last) for at, first, last in spans if at == line), None)


def _draft_failures(built: Built, sources: Sources) -> list[tuple[str, str, Frame, Frame | None]] | None:
    """``(failure type, expression, the innermost frame in the user's files, the
    innermost frame of all when it is deeper: inside a library the user's code
    called)`` for each problem ``draft_export`` records with a user stack, where
    ``export`` stops at the first; None when ``draft_export`` itself failed."""
    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = torch.export.draft_export(built.module, built.args, built.kwargs, dynamic_shapes=built.dynamic_shapes, strict=built.strict)
        report = ep._report  # type: ignore[attr-defined]
    except BaseException:  # noqa: BLE001 - fall back to the first error alone
        return None
    # A report names files by ids of torch's process-wide intern table, and lists only
    # the names first interned during its own run: the second target of a file finds
    # the model's file under an id the first target's run interned.
    files: dict[Any, str] = _interned_files()
    files.update(getattr(report, "str_to_filename", {}) or {})
    out = []
    for failure in report.failures:
        data = failure.data if isinstance(failure.data, dict) else {}
        stack = data.get("user_stack") or data.get("stack") or []
        if not isinstance(stack, list):
            continue
        frames = [Frame(files.get(f.get("filename"), str(f.get("filename"))), int(f.get("line", 0)), f.get("name", "")) for f in stack if isinstance(f, dict)]
        frame = sources.deepest(frames)
        if frame is not None:
            inner = frames[-1] if frames and frames[-1] is not frame and frames.index(frame) < len(frames) - 1 else None
            out.append((getattr(failure.failure_type, "name", ""), str(data.get("expr", "?")), frame, inner))
    return out


def _interned_files() -> dict[Any, str]:
    """Id -> file name of every string torch's structured logging interned so far."""
    try:
        from exportlens.core.torchcompat import intern_table

        return intern_table()
    except (ImportError, AttributeError):
        return {}


def _data_dependent(built: Built, sources: Sources, name: str, policy: Policy) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    seen: set[tuple[str, int]] = set()
    failures = _draft_failures(built, sources)
    if failures is None and not values_real(built):
        # torch 2.15's draft_export copies every weight's values, and stops at a fake
        # one: with real weights (where they fit) it names the line.
        built.weights_note = policy.require_values(built, "draft_export, which finds the line of a data-dependent guard, needs the weights' values with this torch") or ""
    for kind, expr, frame, inner in failures or []:
        key = (os.path.realpath(frame.file), frame.line)
        if kind != "DATA_DEPENDENT_ERROR" or key in seen:
            continue
        seen.add(key)
        index = sources.index(frame.file)
        statement = index.line_text(frame.line).strip()
        related: tuple[Related, ...] = ()
        if inner is not None:
            # The check is in a library the user's line called: the user's line is
            # where to act (a torch._check before the call), the library's is why.
            library_line = linecache.getline(inner.file, inner.line).strip()
            shown = os.path.join(os.path.basename(os.path.dirname(inner.file)), os.path.basename(inner.file))
            message = analyze.data_dependent_message(expr, statement=statement, library=(shown, inner.line, library_line))
            related = (Related(os.path.realpath(inner.file), inner.line, f"the check inside the library{f': `{library_line}`' if library_line else ''} ({inner.function or 'here'})"),)
        else:
            message = analyze.data_dependent_message(expr, statement=statement)
        found = Diagnostic.at("data-dependent", message, statement_at(index, frame.line), name)
        out.append(replace(found, related=found.related + related) if related else found)
    return out


def _specialisations(built: Built, sources: Sources) -> tuple[Related, ...]:
    """The lines whose guards pinned a dimension declared dynamic, in whichever of
    the user's files they are."""
    related = []
    seen: set[tuple[str, int]] = set()
    for kind, expr, frame, _ in _draft_failures(built, sources) or []:
        key = (os.path.realpath(frame.file), frame.line)
        if kind in {"GUARD_ADDED", "CONSTRAINT_VIOLATION_ERROR"} and key not in seen:
            seen.add(key)
            related.append(Related(key[0], frame.line, f"this code specialises the dimension (`{expr}`)"))
    return tuple(related)


def default_request(path: str, **kw: Any) -> ExportRequest:
    return ExportRequest(id=0, path=os.path.abspath(path), **kw)
