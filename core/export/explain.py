"""Why an export failed: a failure turned into diagnostics at the user's lines.

``diagnose_failure`` (called by the job, ``job.export_target``, for a target whose
export raised) classifies torch's error (``analyze``), then finds the line it is
about: a malformed ``dynamic_shapes`` at its declaration, a constraint violation at
the line that pinned the dimension (or an example input outside its ``Dim``'s
range), an export error or a banned mutation by running the model once eagerly
(with real weights where the weights policy can have them), a data-dependent guard
by ``draft_export``. Runs in the job process (torch).
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import warnings
from dataclasses import replace
from typing import Any

from exportlens.core.export import analyze, constant_updates, dim_ranges, shapes_spec
from exportlens.core.export.analyze import ErrorFacts
from exportlens.core.export.loader import Loaded, frames_of, sources_of
from exportlens.core.export.targets import Built, Candidate
from exportlens.core.export.weights import Policy, fake_explains, values_real
from exportlens.core.model.results import Diagnostic, Related
from exportlens.core.project.settings import DEFAULT_MEMORY_MB
from exportlens.core.source.frames import Frame
from exportlens.core.source.project import UserSources
from exportlens.core.source.sourcemap import SourceIndex
from exportlens.core.source.spans import statement_at


def _facts(e: BaseException) -> ErrorFacts:
    error_type = getattr(getattr(e, "error_type", None), "name", None)
    return ErrorFacts(
        type_names=tuple(c.__name__ for c in type(e).__mro__),
        message=str(e),
        frames=tuple(frames_of(e)),
        error_type=error_type,
    )


def diagnose_failure(
    failure: BaseException, built: Built, candidate: Candidate, loaded: Loaded, sources: UserSources | None = None, policy: Policy | None = None
) -> list[Diagnostic]:
    name, path, index = candidate.decl.name, loaded.path, loaded.index
    sources = sources or sources_of(loaded)
    policy = policy or Policy("real", DEFAULT_MEMORY_MB)
    facts = _facts(failure)
    code = analyze.classify(facts)

    if shapes_spec.malformed(facts):
        # torch's own check, before tracing: no user frame; the declaration is the line.
        declared = shapes_spec.declaration(index, target_extent(candidate, index)) or candidate.where
        return [Diagnostic.at(code, analyze.message_for(code, facts, name), declared, name)]
    if code == "data-dependent":
        collected = _data_dependent(built, sources, name, policy)
        if collected:
            return collected
    if code == "constraint-violation":
        outside = _example_outside_its_range(failure, built, candidate, index)
        if outside:
            return outside
        where, related = analyze.constraint_location(facts, index, path, sources, target_extent(candidate, index))
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
    return dim_ranges.diagnose(found, candidate, index, target_extent(candidate, index)) if found else []


def _eager_failure(error: BaseException, candidate: Candidate, loaded: Loaded, sources: UserSources) -> Diagnostic:
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


def _library_frame(frames: tuple[Frame, ...], mine: Frame | None, sources: UserSources) -> Frame | None:
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


def target_extent(candidate: Candidate, index: SourceIndex) -> tuple[int, int] | None:
    """The lines of the target's declaration, decorators included: where its own
    ``Dim``s are (None for the module-globals form, whose ``Dim``s are the file's)."""
    if candidate.decl.form == "globals":
        return None
    line = candidate.where.line
    spans = [(c.where.line, c.first_line, c.last_line) for c in index.classes.values()]
    spans += [(f.where.line, f.first_line, f.last_line) for f in index.all_functions()]
    return next(((first, last) for at, first, last in spans if at == line), None)


def _draft_failures(built: Built, sources: UserSources) -> list[tuple[str, str, Frame, Frame | None, dict[str, Any]]] | None:
    """``(failure type, expression, the innermost frame in the user's files, the
    innermost frame of all when it is deeper: inside a library the user's code
    called, the failure's data)`` for each problem ``draft_export`` records with a
    user stack, where ``export`` stops at the first; None when ``draft_export``
    itself failed."""
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
            out.append((getattr(failure.failure_type, "name", ""), str(data.get("expr", "?")), frame, inner, data))
    return out


def _interned_files() -> dict[Any, str]:
    """Id -> file name of every string torch's structured logging interned so far."""
    try:
        from exportlens.core.torchcompat import intern_table

        return intern_table()
    except (ImportError, AttributeError):
        return {}


def _data_dependent(built: Built, sources: UserSources, name: str, policy: Policy) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    seen: set[tuple[str, int]] = set()
    failures = _draft_failures(built, sources)
    if failures is None and not values_real(built):
        # torch 2.15's draft_export copies every weight's values, and stops at a fake
        # one: with real weights (where they fit) it names the line.
        built.weights_note = policy.require_values(built, "draft_export, which finds the line of a data-dependent guard, needs the weights' values with this torch") or ""
    for kind, expr, frame, inner, data in failures or []:
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
        found = Diagnostic.at("data-dependent", message, statement_at(index, frame.line), name, facts=_guard_facts(expr, data))
        out.append(replace(found, related=found.related + related) if related else found)
    return out


def _guard_facts(expr: str, data: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """What a fix needs of a data-dependent guard (``core/fixes/checks``): its
    expression, the value it had on the example inputs (``draft_export`` runs the
    real tensors beside the fake ones), and each local name of the user's frame that
    holds one symbol (``s`` for ``u0`` after ``s = step.item()``)."""
    facts = [("expr", expr)]
    if data.get("result") is not None:
        facts.append(("result", str(data["result"])))
    frame_locals = data.get("frame_locals")
    held = frame_locals.get("locals") if isinstance(frame_locals, dict) else None
    for local, values in (held or {}).items():
        if isinstance(local, str) and isinstance(values, list) and len(values) == 1 and isinstance(values[0], str) and values[0].isidentifier():
            facts.append((f"name:{values[0]}", local))
    return tuple(facts)


def _specialisations(built: Built, sources: UserSources) -> tuple[Related, ...]:
    """The lines whose guards pinned a dimension declared dynamic, in whichever of
    the user's files they are."""
    related = []
    seen: set[tuple[str, int]] = set()
    for kind, expr, frame, _, _ in _draft_failures(built, sources) or []:
        key = (os.path.realpath(frame.file), frame.line)
        if kind in {"GUARD_ADDED", "CONSTRAINT_VIOLATION_ERROR"} and key not in seen:
            seen.add(key)
            related.append(Related(key[0], frame.line, f"this code specialises the dimension (`{expr}`)"))
    return tuple(related)
