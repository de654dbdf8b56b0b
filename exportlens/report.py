"""Printing results: for people, each diagnostic as ``path:line:col: code message``
(a notebook's as ``nb.ipynb:cell 3:line:col``, ``exportlens.cells``)
followed by the source it points at with the span underlined and its notes (or one
line each, ``--output-format concise``) and signature tables aligned in terminal
cells; for tools, the contract's JSON document. Torch-free."""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Callable, Iterable

from exportlens.cells import Cells
from exportlens.core.model import repeated
from exportlens.core.model.lowering import Lowering
from exportlens.core.model.results import Diagnostic, FileResult, Related, TargetResult, weights_phrase
from exportlens.core.model.signature import InputSpec, OutputSpec, Signature, named_dims
from exportlens.excerpt import Sources, excerpt
from exportlens.terminal import Style, ljust, width

JSON_VERSION = 1


def display_path(path: str, cwd: str | None = None) -> str:
    cwd = cwd or os.getcwd()
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


# -- JSON -----------------------------------------------------------------------


def spec_json(spec: InputSpec | OutputSpec, path: str | None = None, cells: Cells | None = None) -> dict[str, Any]:
    """``path``: the result's file, whose cells a line of its own is counted in."""
    out: dict[str, Any] = {"kind": spec.kind, "name": spec.arg.name, "target": spec.target}
    if isinstance(spec, InputSpec) and spec.kind == "BUFFER":
        out["persistent"] = spec.persistent
    out["arg"] = spec.arg.kind
    if spec.arg.kind == "constant":
        out["value"] = spec.arg.value
    if spec.arg.kind == "custom_obj":
        out["class_fqn"] = spec.arg.class_fqn
    meta = spec.arg.meta
    if meta is not None:
        out["dtype"] = meta.dtype
        out["shape"] = list(meta.shape)
        out["device"] = meta.device
    out["line"] = spec.source.line if spec.source else None
    if spec.source is not None and spec.source.path:
        out["file"] = display_path(spec.source.path)  # a local module, not the declaring file
    if spec.source is not None and cells is not None and (spec.source.path or path):
        cell, out["line"] = cells.place(spec.source.path or path or "", spec.source.line)
        if cell is not None:
            out["cell"] = cell
    return out


def signature_json(sig: Signature, path: str | None = None, cells: Cells | None = None) -> dict[str, Any]:
    return {
        "inputs": [spec_json(s, path, cells) for s in sig.inputs],
        "outputs": [spec_json(s, path, cells) for s in sig.outputs],
        "ranges": {k: [lo, hi] for k, (lo, hi) in sig.ranges.items()},
        "dim_names": dict(sig.dim_names),
    }


def diagnostic_json(d: Diagnostic, path: str | None = None, cells: Cells | None = None) -> dict[str, Any]:
    """``path``: the result's file; with ``cells``, a notebook's lines are counted in
    their cell, which ``cell`` names (``related`` places too)."""
    cell = None
    if cells is not None and (d.path or path):
        cell, d = cells.diagnostic(d.path or path or "", d)
    out: dict[str, Any] = {
        "code": d.code,
        "severity": d.severity,
        "line": d.line,
        "column": d.column,
        "end_line": d.end_line if d.end_line is not None else d.line,
        "end_column": d.end_column if d.end_column is not None else d.column + 1,
        "message": d.message,
        "target": d.target,
    }
    if d.path:
        out["file"] = display_path(d.path)  # a local module, not the result's own file
    if cell is not None:
        out["cell"] = cell
    if d.related:  # paths written as ``path`` is
        out["related"] = [_related_json(r, cells) for r in d.related]
    return out


def _related_json(r: Related, cells: Cells | None) -> dict[str, Any]:
    cell, r = cells.related(r) if cells is not None else (None, r)
    out: dict[str, Any] = {"path": display_path(r.path), "line": r.line, "column": r.column, "message": r.message}
    if cell is not None:
        out["cell"] = cell
    return out


def target_json(t: TargetResult, path: str | None = None, cells: Cells | None = None) -> dict[str, Any]:
    cell, line = cells.place(path, t.line) if cells is not None and path and t.line > 0 else (None, t.line)
    out: dict[str, Any] = {
        "name": t.name,
        "line": line,
        "status": t.status,
        "export_ms": round(t.export_ms, 1) if t.export_ms is not None else None,
    }
    if cell is not None:
        out["cell"] = cell
    if t.weights is not None:
        out["weights"] = t.weights
    if t.weights_note:
        out["weights_note"] = t.weights_note
    if t.status == "ok" and t.signature is not None:
        out["signature"] = signature_json(t.signature, path, cells)
    if t.run is not None:
        out["run"] = {"status": t.run.status, "reason": t.run.reason or None}
    if t.lowerings:
        out["lowering"] = lowerings_json(t.lowerings)
    return out


def _finite(value: float | None, digits: int = 6) -> float | None:
    """JSON has no infinity or NaN: an error that is not a number (shapes differ) is null."""
    return None if value is None or not math.isfinite(value) else float(f"{value:.{digits}g}")


def lowerings_json(lowerings: Iterable[Lowering]) -> dict[str, Any]:
    """A target's ``lowering``: the ONNX record's fields (as before ExecuTorch), and an
    ``executorch`` entry with the ExecuTorch record, each when that format was lowered."""
    out: dict[str, Any] = {}
    for lowering in lowerings:
        if lowering.format == "onnx":
            out.update(lowering_json(lowering))
        else:
            out[lowering.format] = lowering_json(lowering)
    return out


def _outputs_json(lowering: Lowering) -> list[dict[str, Any]]:
    return [
        {
            "name": o.name,
            "dtype": o.dtype,
            "max_abs_error": _finite(o.max_abs),
            "max_rel_error": _finite(o.max_rel),
            "atol": o.atol,
            "rtol": o.rtol,
            "match": o.ok,
            "compared": o.compared,
            "note": o.note or None,
        }
        for o in lowering.outputs
    ]


def lowering_json(lowering: Lowering) -> dict[str, Any]:
    out: dict[str, Any] = {"format": lowering.format, "status": lowering.status, "lower_ms": round(lowering.lower_ms, 1)}
    if lowering.format == "onnx":
        out |= {"opset": lowering.opset, "nodes": lowering.nodes}
    else:
        out |= {
            "delegated_ops": lowering.delegated_ops,
            "total_ops": lowering.total_ops,
            "fallback_lines": lowering.fallback_lines,
            "fallback_ops": list(lowering.fallback_ops),
            "pte_bytes": lowering.pte_bytes,
            "planned_memory_bytes": lowering.planned_memory_bytes,
            "workspace_bytes": lowering.workspace_bytes,
            "memory_dims": lowering.memory_dims or None,
            "run_peak_bytes": lowering.run_peak_bytes,
            "budget_bytes": lowering.budget_bytes,
        }
    out |= {"errors": list(lowering.errors), "skipped": lowering.skipped or None}
    out |= {
        "max_abs_error": _finite(lowering.max_abs),
        "max_rel_error": _finite(lowering.max_rel),
        "outputs": _outputs_json(lowering),
        "versions": lowering.versions,
    }
    return out


def to_json(
    results: Iterable[FileResult],
    cwd: str | None = None,
    origins: dict[str, str] | None = None,
    fixes: Callable[[Diagnostic, str], list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The JSON report; ``origins``: path -> where its result came from, ``"cache"``
    (this machine's folder) or ``"store"`` (the shared cache); any other file's was
    made by this run (``"run"``). ``fixes``: a diagnostic's verified fixes (of the
    result at that path), as JSON; a diagnostic with some carries ``fixes``."""
    origins = origins or {}
    cells = Cells()

    def diagnostic(d: Diagnostic, path: str) -> dict[str, Any]:
        out = diagnostic_json(d, path, cells)
        found = fixes(d, path) if fixes is not None else []
        if found:
            out["fixes"] = found
        return out

    return {
        "version": JSON_VERSION,
        "files": [
            {
                "path": display_path(r.path, cwd),
                "from": origins.get(r.path, "run"),
                "diagnostics": [diagnostic(d, r.path) for d in r.diagnostics],
                "targets": [target_json(t, r.path, cells) for t in r.targets],
            }
            for r in results
        ],
    }


# -- text -----------------------------------------------------------------------


def diagnostic_line(path: str, d: Diagnostic, style: Style | None = None) -> str:
    """One line: ``path:line:col: severity[code]: message [target]`` (the concise
    format). The severity is spelt out, as compilers do (``error[E0308]:``): colour
    alone says nothing in a CI log, a pipe or to a screen reader."""
    style = style or Style(False)
    head = d.message.partition("\n")[0]
    target = f" [{d.target}]" if d.target else ""
    return f"{style(f'{path}:{d.line}:{d.column}:', 'bold')} {style.severity(f'{d.severity}[{d.code}]:', d.severity)} {head}{target}"


def diagnostic_full(path: str, d: Diagnostic, sources: Sources, style: Style | None = None, source_path: str | None = None) -> str:
    """The one line, the rest of the message, the source excerpt with the span
    underlined, then each related place (the line that specialised a dim...) as a
    note with its own line. ``source_path``: the file the line numbers refer to."""
    style = style or Style(False)
    cell, shown = sources.cells.diagnostic(source_path, d) if source_path is not None else (None, d)
    out = [diagnostic_line(f"{path}:cell {cell}" if cell is not None else path, shown, style)]
    out += [f"    {extra.rstrip()}" for extra in d.message.partition("\n")[2].splitlines() if extra.strip()]
    if source_path is not None:
        out += excerpt(sources, source_path, d.line, d.column, d.end_line, d.end_column, style, severity=d.severity, offset=d.line - shown.line)
    for r in d.related:
        r_cell, r_shown = sources.cells.related(r)
        where = display_path(r.path) + (f":cell {r_cell}" if r_cell is not None else "")
        out.append(f"  {style('= note:', 'bold', 'cyan')} {where}:{r_shown.line}: {r.message}")
        out += excerpt(sources, r.path, r.line, r.column, None, None, style, severity="information", offset=r.line - r_shown.line)
    return "\n".join(out)


def _dims(shape: Iterable[Any], names: dict[str, str]) -> str:
    """``[batch, 16]``: symbols by the user's ``Dim`` names (JSON keeps torch's)."""
    return "[" + ", ".join(named_dims(str(d), names) for d in shape) + "]"


def _spec_row(direction: str, spec: InputSpec | OutputSpec, names: dict[str, str], place: Callable[[str | None, int], str]) -> list[str]:
    target = spec.target or ""
    if isinstance(spec, InputSpec) and spec.persistent is False:
        target += " (non-persistent)"
    meta = spec.arg.meta
    if meta is not None:
        value = f"{meta.dtype}{_dims(meta.shape, names)} {meta.device}"
    elif spec.arg.kind == "constant":
        value = f"constant {spec.arg.value!r}"
    elif spec.arg.kind == "custom_obj":
        value = f"custom_obj {spec.arg.class_fqn or ''}"
    else:
        value = spec.arg.kind
    line = place(spec.source.path, spec.source.line) if spec.source else ""
    if spec.source is not None and spec.source.path:
        line = display_path(spec.source.path) + line
    return [direction, spec.kind, spec.arg.name, target, value, line]


def signature_table(sig: Signature, indent: str = "  ", path: str | None = None, cells: Cells | None = None) -> list[str]:
    """One row per spec; the specs of repeated layers (at least ``MIN_GROUP`` that differ
    only in their index) as one row with a count (``core/model/repeated.py``). A spec's
    line is ``:14``, or ``:cell 3:14`` in a notebook (``path``, the result's file)."""
    names = sig.dim_names

    def place(file: str | None, line: int) -> str:
        cell, at = cells.place(file or path or "", line) if cells is not None and (file or path) else (None, line)
        return f":cell {cell}:{at}" if cell is not None else f":{at}"

    rows = [[*_spec_row(direction, r.spec, names, place), f"×{r.count}" if r.count > 1 else ""] for direction, specs in (("in", sig.inputs), ("out", sig.outputs)) for r in repeated.group(specs)]
    if not rows:
        return [indent + "(empty signature)"]
    widths = [max(width(r[i]) for r in rows) for i in range(len(rows[0]))]  # in terminal cells: wide names stay aligned
    lines = [indent + "  ".join(ljust(c, w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if sig.ranges:
        ranges = ", ".join(f"{names.get(k, k)} in [{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]" for k, (lo, hi) in sig.ranges.items())
        lines.append(f"{indent}ranges: {ranges}")
        named = [f"{names[k]} is torch's {k}" for k in sig.ranges if k in names]
        if named:  # torch's messages and print(ep) use its own symbols
            lines.append(f"{indent}dims: {', '.join(named)}")
    return lines


def target_header(path: str, t: TargetResult, cell: int | None = None) -> str:
    """``cell``: the notebook cell ``t.line`` is counted in."""
    took = f", exported in {t.export_ms:.0f} ms" if t.export_ms is not None and t.status == "ok" else ""
    weights = weights_phrase(t)
    made = f" with {weights}" if weights else ""
    where = f"{path}:{t.line}" if t.line > 0 else path  # 0: declared in another file, no line here
    if cell is not None and t.line > 0:
        where = f"{path}:cell {cell}:{t.line}"
    # A run that went as expected says nothing; one that failed or did not happen says so
    # (not for fake weights alone: "with fake weights" says it).
    ran = f"; {t.run.describe()}" if t.run is not None and t.run.status != "ok" and not (t.run.status == "skipped" and t.weights == "fake") else ""
    lowered = "".join(f"; {low.describe()}" for low in t.lowerings)
    note = f"\n  weights: {t.weights_note}" if t.weights_note else ""
    return f"{t.name} ({where}): {t.status}{took}{made}{ran}{lowered}{note}"


def format_text(results: list[FileResult], *, signatures: bool = True, cwd: str | None = None, concise: bool = False, style: Style | None = None) -> str:
    """Diagnostics (full: with excerpts and notes; ``concise``: one line each), then,
    with ``signatures``, each target's header and table."""
    out: list[str] = []
    sources = Sources()
    cells = sources.cells
    for r in results:
        for d in r.diagnostics:
            source = d.path or r.path  # the module the line is in, when not the result's file
            path = display_path(source, cwd)
            if concise:
                cell, shown = cells.diagnostic(source, d)
                out.append(diagnostic_line(f"{path}:cell {cell}" if cell is not None else path, shown, style))
            else:
                out += [diagnostic_full(path, d, sources, style, source), ""]
    if out and not out[-1]:
        out.pop()  # the blank line between full diagnostics, not after the last
    if signatures:
        for r in results:
            path = display_path(r.path, cwd)
            for t in r.targets:
                if out:  # a blank line between sections, none before the first
                    out.append("")
                cell, line = cells.place(r.path, t.line) if t.line > 0 else (None, t.line)
                out.append(target_header(path, dataclasses.replace(t, line=line), cell))
                if t.signature is not None:
                    out.extend(signature_table(t.signature, path=r.path, cells=cells))
    return "\n".join(out)


def summary(results: list[FileResult], seconds: float, cached: int = 0, from_store: int = 0) -> str:
    targets = [t for r in results for t in r.targets]
    ok = sum(t.status == "ok" for t in targets)
    counts: dict[str, int] = {}
    for r in results:
        for d in r.diagnostics:
            counts[d.severity] = counts.get(d.severity, 0) + 1
    parts = [f"{counts[s]} {s if counts[s] == 1 or s == 'information' else s + 's'}" for s in ("error", "warning", "information") if counts.get(s)]
    diag = ", ".join(parts) if parts else "no diagnostics"
    return (
        f"Checked {len(results)} file{'s' * (len(results) != 1)}, {len(targets)} target{'s' * (len(targets) != 1)} "
        f"({ok} exported, {len(targets) - ok} failed): {diag} in {seconds:.1f} s"
        + (f" ({cached} file{'s' * (cached != 1)} from the cache" + (f", {from_store} from the store)" if from_store else ")") if cached else "")
    )
