"""A file's result against the project's snapshot: ``signature-changed`` diagnostics.

Each change is reported at the line of the spec that changed, taken from the new
signature (the ``return`` for an output, the ``forward`` parameter for an input, the
``register_buffer``/parameter line for state); what is gone from the signature is
reported at the line of what took its place (the ``return``, the ``forward``
parameters), else at the target's line. A breaking change is an error, a compatible
one information. Targets the snapshot records and the file no longer declares are
reported at line 1 -- only when the file ran, since a file that failed to import
declares nothing and its targets are not gone.

Applied after a lookup or an export, never stored in the result cache: the snapshot
changes independently of the model.
"""

from __future__ import annotations

import os
from dataclasses import replace

from exportlens.core.contract.compare import Change, compare
from exportlens.core.contract.snapshot import SNAPSHOT_NAME, Snapshot, TargetEntry, entry_of, file_key
from exportlens.core.model.results import Diagnostic, FileResult, TargetResult
from exportlens.core.model.signature import InputSpec, OutputSpec, Signature, SourceLine

CODE = "signature-changed"
_ACCEPT = "if it is intended, run `exportlens snapshot` to record it"
# A file with one of these did not run far enough to declare its targets.
_DID_NOT_RUN = frozenset({"syntax-error", "import-error"})


def check_file(result: FileResult, recorded: dict[str, TargetEntry] | None) -> FileResult:
    """``result`` with a diagnostic for each change against ``recorded`` (the
    snapshot's entries of this file; None when the snapshot has none)."""
    recorded = recorded or {}
    found: list[Diagnostic] = []
    for target in result.targets:
        if target.status != "ok" or target.signature is None:
            continue  # the failure is reported already; there is nothing to compare
        old = recorded.get(target.name)
        if old is None:
            message = f"target `{target.name}` is not in {SNAPSHOT_NAME}\nrun `exportlens snapshot` to record its signature"
            found.append(Diagnostic(CODE, message, target.line, target=target.name, level="information"))
            continue
        for change in compare(old, entry_of(target.signature)):
            found.append(_diagnostic(change, target, target.signature))
    if ran(result):
        declared = {t.name for t in result.targets}
        found += [removed(name) for name in sorted(set(recorded) - declared)]
    return with_diagnostics(result, found)


def ran(result: FileResult) -> bool:
    """Whether the file ran far enough that its targets list is the whole truth: not
    when its declarations are broken -- it did not run, or pyproject.toml names what
    is not there (a misspelt function is no removed target: one error says it)."""
    return not any(
        d.code in _DID_NOT_RUN or (d.code == "target-error" and (d.target is None or _in_pyproject(d)))
        for d in result.diagnostics
    )


def _in_pyproject(d: Diagnostic) -> bool:
    return d.path is not None and os.path.basename(d.path) == "pyproject.toml"


def removed(name: str) -> Diagnostic:
    message = f"target `{name}` is recorded in {SNAPSHOT_NAME} but no longer declared\n{_ACCEPT}"
    return Diagnostic(CODE, message, 1, target=name, level="error")


def unreadable(path: str, problem: str) -> Diagnostic:
    message = f"{path}: {problem}\nsignatures are not compared; fix the file, or write it anew with `exportlens snapshot`"
    return Diagnostic(CODE, message, 1, level="error")


def with_diagnostics(result: FileResult, found: list[Diagnostic]) -> FileResult:
    return replace(result, diagnostics=result.diagnostics + tuple(found)).sorted() if found else result


def _diagnostic(change: Change, target: TargetResult, signature: Signature) -> Diagnostic:
    where = _where(change, signature) or SourceLine(target.line)
    return Diagnostic.at(CODE, f"{change.message}\n{_ACCEPT}", where, target.name, level="error" if change.breaking else "information")


def _where(change: Change, signature: Signature) -> SourceLine | None:
    specs: tuple[InputSpec, ...] | tuple[OutputSpec, ...] = signature.inputs if change.side == "input" else signature.outputs
    if change.index is not None and 0 <= change.index < len(specs):
        return specs[change.index].source
    # Gone from the signature: the line of what took its place.
    user = "USER_INPUT" if change.side == "input" else "USER_OUTPUT"
    return next((s.source for s in specs if s.kind == user and s.source is not None), None)


def vanished(snapshot: Snapshot, root: str, scopes: list[str], checked: set[str]) -> list[FileResult]:
    """Results for the snapshot's files under ``scopes`` that were not checked (the
    file is gone, or declares nothing any more): each recorded target removed."""
    out: list[FileResult] = []
    for key, targets in sorted(snapshot.files.items()):
        path = os.path.normpath(os.path.join(root, key))
        if not targets or path in checked or not any(under(path, scope) for scope in scopes):
            continue
        out.append(FileResult(path=path, diagnostics=tuple(removed(name) for name in sorted(targets))))
    return out


def under(path: str, scope: str) -> bool:
    """Whether the absolute ``path`` is ``scope`` or inside the folder ``scope``."""
    scope = os.path.abspath(scope)
    return path == scope or path.startswith(scope.rstrip(os.sep) + os.sep)


__all__ = ["CODE", "check_file", "file_key", "ran", "removed", "under", "unreadable", "vanished", "with_diagnostics"]
