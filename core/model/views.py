"""A result as seen from a local module the targets' code lives in.

A real project declares targets in one file (``targets.py``, a factory, pyproject's
``targets``) and keeps the model classes in their own modules (``pkg/model.py``).
Every line of a result names its file (``Diagnostic.path``, ``SourceLine.path``);
``view_for`` turns the results of the declaring files into one result *for the
module*: its diagnostics and spec lines, as if it declared the targets that
exercise it. The CLI (``check``/``show`` on a module) and the server (opening the
module) show the same view. Pure and torch-free.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace

from exportlens.core.model.results import Diagnostic, FileResult, Related, TargetResult
from exportlens.core.model.signature import InputSpec, OutputSpec, Signature, SourceLine


def _real(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


def _here(where: SourceLine | None, path: str) -> SourceLine | None:
    """``where`` without its path when it is in ``path``; None when it is elsewhere."""
    if where is None or where.path is None or _real(where.path) != path:
        return None
    return replace(where, path=None)


def _signature_here(sig: Signature, path: str) -> tuple[Signature, bool]:
    """The signature with only the lines in ``path``; whether any was."""
    inputs: list[InputSpec] = [replace(s, source=_here(s.source, path)) for s in sig.inputs]
    outputs: list[OutputSpec] = [replace(s, source=_here(s.source, path)) for s in sig.outputs]
    touched = any(s.source is not None for s in inputs) or any(s.source is not None for s in outputs)
    return replace(sig, inputs=tuple(inputs), outputs=tuple(outputs)), touched


def _target_here(t: TargetResult, path: str) -> TargetResult | None:
    """The target as the module sees it, or None when none of its lines is there.
    Its line is the exported class's ``class`` line when that is in the module
    (where hovers show the whole signature), else 0 (no line of the module)."""
    cls = _here(t.module_class, path)
    sig, touched = _signature_here(t.signature, path) if t.signature is not None else (None, False)
    if cls is None and not touched:
        return None
    return replace(t, line=cls.line if cls is not None else 0, signature=sig, module_class=cls)


def _diagnostic_here(d: Diagnostic, path: str) -> Diagnostic | None:
    if d.path is None or _real(d.path) != path:
        return None
    return replace(d, path=None)


def exercises(result: FileResult, path: str) -> bool:
    """Whether ``result``'s run imported ``path`` (one of its local modules)."""
    return _real(path) in result.local_imports


def view_for(path: str, results: Iterable[FileResult]) -> FileResult:
    """The result for the module ``path``: the diagnostics at its lines and the
    targets whose code it holds, from every result whose run imported it. A
    target of a failed import fails in every module it imported: its error (at the
    module's line, or the declaring file's) is kept, pointing back through its
    related information."""
    real = _real(path)
    diagnostics: list[Diagnostic] = []
    targets: list[TargetResult] = []
    imports: dict[str, str] = {}
    for r in results:
        if _real(r.path) == real or not exercises(r, real):
            continue
        diagnostics += [d for d in (_diagnostic_here(x, real) for x in r.diagnostics) if d is not None]
        targets += [t for t in (_target_here(x, real) for x in r.targets) if t is not None]
        # The view depends on the declaring file and everything its run read.
        imports.update(zip(r.local_imports, r.local_import_hashes or ("",) * len(r.local_imports), strict=False))
        imports.setdefault(_real(r.path), "")
    imports.pop(real, None)
    ordered = sorted(imports)
    return FileResult(
        path=path,
        diagnostics=tuple(diagnostics),
        targets=tuple(targets),
        local_imports=tuple(ordered),
        local_import_hashes=tuple(imports[p] for p in ordered),
    ).sorted()


def at_declaration(d: Diagnostic, path: str) -> Diagnostic | None:
    """A diagnostic found in a local module, as the declaring file ``path`` shows it:
    at the line of the target that found it (its related information back to the
    target), its message naming the module's line, and that line first among its
    related locations. None when ``d`` has no line in ``path`` to stand on. An editor
    publishes ``d`` itself in the module (``view_for``); showing it in the declaring
    file at the module's line number would point at an unrelated line there."""
    real = _real(path)
    if d.path is None or _real(d.path) == real:
        return replace(d, path=None)
    back = next((r for r in reversed(d.related) if _real(r.path) == real), None)
    if back is None:
        return None
    here = Related(d.path, d.line, "where the code is", d.column)
    others = tuple(r for r in d.related if r is not back)
    message = f"{os.path.basename(d.path)}:{d.line}: {d.message}"
    return replace(d, message=message, line=back.line, column=back.column, end_line=None, end_column=None, related=(here, *others), path=None)
