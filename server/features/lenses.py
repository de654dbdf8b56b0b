"""``textDocument/codeLens``: each target's status where it is declared, with its commands.

Above a target's line (in a model module: above the exported class's ``class``
line) the editor shows what its last export found and two actions:

- ``✓ Net exported in 812 ms · 1 input → 1 output · 2 parameters`` (or ``✗ Net:
  constraint-violation``): runs ``exportlens.reexport``, which exports the file again
  bypassing the cache;
- ``Show graph``: runs ``exportlens.graph`` for the target, the graph view whose rows
  jump to the source;
- with lowering requested, one per format: ``ONNX ✓ opset 18 · 42 nodes``,
  ``ExecuTorch ✓ XNNPACK runs 42 of 45 ops; 3 lines fall back · .pte 283.9 KB ·
  planned memory 32.6 KB`` (or what failed), which open the graph view too.

Lenses are computed from the document's result when asked (a handful per file, no
index needed). A lens stands on a line only while that line's text is what the
result was made from, as hovers and hints do. The client is asked to refresh
(``workspace/codeLens/refresh``) whenever a result is published.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from exportlens.core.model.lowering import Lowering
from exportlens.core.model.results import FileResult, TargetResult, weights_phrase
from exportlens.server.positions import split_lines

if TYPE_CHECKING:
    from exportlens.server.host import Host
    from exportlens.server.state import DocumentState

log = logging.getLogger(__name__)

REEXPORT = "exportlens.reexport"
GRAPH = "exportlens.graph"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def status_title(t: TargetResult, result: FileResult, cached: bool) -> str:
    """One line: what the target's last export found."""
    if t.status != "ok" or t.signature is None:
        codes = [d.code for d in result.diagnostics if d.target == t.name and d.severity == "error"]
        return f"✗ {t.name}: {codes[0] if codes else 'export failed'}"
    sig = t.signature
    inputs = sum(s.kind == "USER_INPUT" for s in sig.inputs)
    outputs = sum(s.kind == "USER_OUTPUT" for s in sig.outputs)
    parts = [f"{_plural(inputs, 'input')} → {_plural(outputs, 'output')}"]
    for kind, word in (("PARAMETER", "parameter"), ("BUFFER", "buffer")):
        n = sum(s.kind == kind for s in sig.inputs)
        if n:
            parts.append(_plural(n, word))
    mutated = sum(s.kind in ("BUFFER_MUTATION", "USER_INPUT_MUTATION", "PARAMETER_MUTATION") for s in sig.outputs)
    if mutated:
        parts.append(f"{mutated} mutated")
    weights = weights_phrase(t)
    if weights:
        parts.insert(0, weights)
    took = f" in {t.export_ms:.0f} ms" if t.export_ms is not None else ""
    return f"✓ {t.name} exported{took}{' (cached)' if cached else ''} · {' · '.join(parts)}"


def lowering_title(low: Lowering) -> str:
    """One lowering in a line: ``ONNX ✓ opset 18 · 42 nodes``, ``ExecuTorch ✗ mismatch · ...``."""
    name = low.title
    if low.status == "unavailable":
        return f"{name}: not installed"
    facts = [f"opset {low.opset}" if low.opset is not None else "", f"{low.nodes} nodes" if low.nodes is not None else ""]
    facts += [low.coverage() or "", low.sizes() or ""]
    detail = " · ".join(f for f in facts if f)
    if low.status == "ok":
        return f"{name} ✓ {detail}"
    if low.status == "not-run":
        return f"{name} · {detail} · not run ({low.not_run_reason})" if detail else f"{name} · not run"
    if low.format == "onnx":  # as before ExecuTorch: a failure's facts are in the hover
        return f"{name} ✗ {low.status}"
    return f"{name} ✗ {low.status}" + (f" · {detail}" if detail else "")


def lenses_for(state: DocumentState, current: list[str], uri: str) -> list[types.CodeLens]:
    result = state.result
    if result is None:
        return []
    out: list[types.CodeLens] = []
    for t in result.targets:
        line = t.line - 1
        if not state.line_unchanged(current, line):
            continue  # no line of this file, or it changed since the export
        where = types.Range(types.Position(line, 0), types.Position(line, 0))
        graph_args: list[Any] = [{"uri": uri, "target": t.name}]
        out.append(types.CodeLens(where, types.Command(status_title(t, result, state.from_cache), REEXPORT, arguments=[uri])))
        if t.status == "ok" and t.program:
            out.append(types.CodeLens(where, types.Command("Show graph", GRAPH, arguments=graph_args)))
        for low in t.lowerings:
            out.append(types.CodeLens(where, types.Command(lowering_title(low), GRAPH, arguments=graph_args)))
    return out


def register(server: Host) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    def on_code_lens(ls: Host, params: types.CodeLensParams) -> list[types.CodeLens]:
        try:
            uri = params.text_document.uri
            state = ls.documents.get(uri)
            if state is None:
                return []
            document = ls.workspace.get_text_document(uri)
            return lenses_for(state, split_lines(document.source), uri)
        except Exception:
            log.exception("code lenses failed")
            return []
