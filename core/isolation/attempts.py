"""One request, as many job processes as it takes.

A target that kills its job (a segfault, a hang, a memory blow-up) must not cost the
file's other targets. So when a job dies in the middle of target ``B``, the worker
records ``B`` as an error with the failure's diagnostic, keeps what the job already
finished, and forks a new job that skips both; a failure before any target started
is file-level and ends the request. The results of every attempt are merged into
one ``FileResult`` in the file's target order.

A run with ``weights = "auto"`` may ask for targets (or the whole file) to be run
again with real weights (``FileResult.fallbacks``, the policy's reasons; see
``exportlens.core.export.weights``); so does a job that crashed while weights were
fake, since a library handed a fake tensor may crash where it would run on a real one.
The worker runs them again with ``weights = "real"`` and the real results replace them.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from exportlens.core.export.weights import CRASHED_FAKE, retry_after_crash, with_real_weights
from exportlens.core.isolation.failure import Failure, failure_diagnostic, lowering_failure
from exportlens.core.isolation.pipes import OUTPUT_TAIL, Tail
from exportlens.core.isolation.supervise import Attempt
from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import Diagnostic, Fallback, FileResult, TargetDecl, TargetResult
from exportlens.core.source.sourcemap import SourceIndex
from exportlens.core.source.spans import complete_range

RunChild = Callable[[ExportRequest, Tail], Attempt]
INDEX_TEXT_MAX = 16 << 20  # bytes of a model file the worker reads to give its diagnostics ranges


@dataclass
class Merged:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    targets: dict[str, TargetResult] = field(default_factory=dict)
    decls: list[TargetDecl] | None = None


def run_request(request: ExportRequest, run_child: RunChild) -> FileResult | None:
    """Run the request's targets, re-forking past any target that kills its job, and
    again with real weights where the weights policy asks; None when it was cancelled."""
    started = time.monotonic()
    done = _attempts(request, run_child)
    if done is None:
        return None
    result, decls = done
    for reason, names in _by_reason(result.fallbacks):
        if names is None:  # the whole file
            again = _attempts(with_real_weights(request, reason), run_child)
            if again is None:
                return None
            result = again[0]
            break
        others = tuple(d.name for d in decls if d.name not in names)
        again = _attempts(replace(with_real_weights(request, reason), skip=(*request.skip, *others)), run_child)
        if again is None:
            return None
        result = _merge_real(result, again[0], names, decls)
    return replace(result, fallbacks=(), elapsed_ms=(time.monotonic() - started) * 1000)


def _by_reason(fallbacks: tuple[Fallback, ...]) -> list[tuple[str, set[str] | None]]:
    """One run per reason: the targets that fell back for it (None: the whole file)."""
    whole = next((f.reason for f in fallbacks if f.target is None), None)
    if whole is not None:
        return [(whole, None)]
    groups: dict[str, set[str]] = {}
    for f in fallbacks:
        groups.setdefault(f.reason, set()).add(f.target or "")
    return list(groups.items())


def _merge_real(first: FileResult, real: FileResult, names: set[str], decls: list[TargetDecl]) -> FileResult:
    """``first`` with the targets ``names`` as the run with real weights found them."""
    order = {d.name: i for i, d in enumerate(decls)}
    targets = [t for t in first.targets if t.name not in names] + [t for t in real.targets if t.name in names]
    depends = dict(zip(first.local_imports, first.local_import_hashes, strict=False))
    for path, state in zip(real.local_imports, real.local_import_hashes, strict=False):
        depends.setdefault(path, state)
    written = dict(zip(first.written, first.written_hashes, strict=False))
    for path, state in zip(real.written, real.written_hashes, strict=False):
        written.setdefault(path, state)
    libraries = dict(zip(first.libraries, first.library_states, strict=False))
    for path, state in zip(real.libraries, real.library_states, strict=False):
        libraries.setdefault(path, state)
    return replace(
        first,
        diagnostics=first.diagnostics + tuple(d for d in real.diagnostics if d.target in names),
        targets=tuple(sorted(targets, key=lambda t: order.get(t.name, len(order)))),
        local_imports=tuple(sorted(depends)),
        local_import_hashes=tuple(depends[p] for p in sorted(depends)),
        written=tuple(sorted(written)),
        written_hashes=tuple(written[p] for p in sorted(written)),
        missing_modules=tuple(sorted({*first.missing_modules, *real.missing_modules})),
        libraries=tuple(sorted(libraries)),
        library_states=tuple(libraries[p] for p in sorted(libraries)),
        output_tail=(first.output_tail + real.output_tail)[-OUTPUT_TAIL:],
        fallbacks=tuple(f for f in first.fallbacks if f.target not in names),
    ).sorted()


def _attempts(request: ExportRequest, run_child: RunChild) -> tuple[FileResult, list[TargetDecl]] | None:
    """The request in as many job processes as it takes, and the file's targets;
    None when it was cancelled."""
    started = time.monotonic()
    merged = Merged()
    skip = list(request.skip)
    tail = Tail()
    crashed: list[Fallback] = []  # what crashed with fake weights, to run with real ones
    while True:
        attempt = run_child(replace(request, skip=tuple(skip)), tail)
        if attempt.cancelled:
            return None
        if attempt.decls is not None and merged.decls is None:
            merged.decls = attempt.decls
        if attempt.result is not None:
            last = replace(attempt.result, fallbacks=attempt.result.fallbacks + tuple(crashed))
            return _finish(request, merged, last, tail, started), list(merged.decls or ())
        for finished, found in attempt.done:
            merged.targets[finished.name] = finished
            merged.diagnostics.extend(found)
            skip.append(finished.name)
        current = attempt.current
        exported = attempt.exported.get(current) if current is not None else None
        if current is not None and exported is not None and current not in skip:
            # It died lowering a target it had exported: the export stands, the lowering says why.
            failure = Failure(attempt.failure or "worker-crash", current, attempt.detail, attempt.dump, tail.text())
            result, found = lowering_failure(request, failure, exported, attempt.lowering.get(current))
            merged.targets[result.name] = result
            merged.diagnostics.extend(found)
            skip.append(result.name)
        elif attempt.failure == "worker-crash" and retry_after_crash(request):
            crashed.append(Fallback(attempt.current, CRASHED_FAKE))
            if attempt.current is None or attempt.current in skip:
                return _finish(request, merged, FileResult(path=request.path, fallbacks=(Fallback(None, CRASHED_FAKE),)), tail, started), list(merged.decls or ())
            skip.append(attempt.current)
        else:
            diagnostic = _diagnose(request, attempt, merged.decls, tail)
            merged.diagnostics.append(diagnostic)
            if attempt.current is None or attempt.current in skip:
                # Before any target started (or a repeat): a file-level failure, stop.
                return _finish(request, merged, FileResult(path=request.path), tail, started), list(merged.decls or ())
            decl = _decl(merged.decls, attempt.current)
            line = decl.line if decl else diagnostic.line
            merged.targets[attempt.current] = TargetResult(attempt.current, line, "error")
            skip.append(attempt.current)
        remaining = [d.name for d in merged.decls or () if d.name not in skip]
        if not remaining:
            last = FileResult(path=request.path, fallbacks=tuple(crashed))
            return _finish(request, merged, last, tail, started), list(merged.decls or ())


def _decl(decls: list[TargetDecl] | None, name: str | None) -> TargetDecl | None:
    return next((d for d in decls or () if d.name == name), None)


def _finish(request: ExportRequest, merged: Merged, last: FileResult, tail: Tail, started: float) -> FileResult:
    targets = dict(merged.targets)
    for t in last.targets:
        targets.setdefault(t.name, t)
    order = {d.name: i for i, d in enumerate(merged.decls or ())}
    ordered = sorted(targets.values(), key=lambda t: order.get(t.name, len(order)))
    # Each file's index once: the model file's, and another project file's a diagnostic stands in.
    indexes: dict[str | None, SourceIndex] = {}

    def index_of(path: str | None) -> SourceIndex:
        key = None if path in (None, request.path) else path
        if key not in indexes:
            indexes[key] = _index_of(request if key is None else replace(request, path=key, source=dict(request.overlays).get(key)))
        return indexes[key]

    own = tuple(complete_range(d, index_of(d.path)) for d in merged.diagnostics)
    return FileResult(
        path=last.path or request.path,
        diagnostics=own + tuple(last.diagnostics),
        targets=tuple(ordered),
        local_imports=last.local_imports,
        local_import_hashes=last.local_import_hashes,
        written=last.written,
        written_hashes=last.written_hashes,
        missing_modules=last.missing_modules,
        libraries=last.libraries,
        library_states=last.library_states,
        fallbacks=last.fallbacks,
        verdicts=last.verdicts,
        output_tail=tail.text(),  # the zygote saw all the output, the job none of it
        elapsed_ms=(time.monotonic() - started) * 1000,
    )


def _diagnose(request: ExportRequest, attempt: Attempt, decls: list[TargetDecl] | None, tail: Tail) -> Diagnostic:
    failure = Failure(attempt.failure or "worker-crash", attempt.current, attempt.detail, attempt.dump, tail.text())
    return failure_diagnostic(request, failure, _decl(decls, attempt.current))


def _index_of(request: ExportRequest) -> SourceIndex:
    """The file's index, to give the worker's own diagnostics a full range.

    This runs in the zygote, which serves every request after this one: whatever the
    file is or holds (nested too deep to parse, a FIFO, gigabytes), it must neither
    raise nor block. At worst the diagnostics keep their bare lines.
    """
    text = request.source if request.source is not None else read_model(request.path)
    try:
        return SourceIndex.build(text, request.path)
    except Exception:  # noqa: BLE001 - build is meant never to raise; only ranges are at stake
        return SourceIndex(path=request.path, text=text)


def read_model(path: str) -> str:
    """The text of a regular file, at most ``INDEX_TEXT_MAX`` bytes of it; "" for
    anything else. Opened non-blocking: opening a FIFO for reading waits for a writer."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(INDEX_TEXT_MAX).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
