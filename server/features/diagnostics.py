"""``textDocument/publishDiagnostics`` (push) and ``textDocument/diagnostic`` (pull).

A client gets exactly one of the two, never both: VS Code and Neovim keep pushed and
pulled diagnostics in separate collections, so serving both would show every
problem twice. Pull is used when the client supports it *and* can be told to pull
again (``workspace/diagnostic/refresh``), because exports also finish out of band
(a helper module changed on disk); otherwise the server pushes, with the document
version the result was made for.

A diagnostic whose line is in a local module the target imports (``Diagnostic.path``)
is published in that module when it is open (``exportlens.server.views``); the
declaring file shows it at the target's line, naming the module's line.

Core diagnostics are 1-based lines with UTF-8 byte columns; ``to_lsp`` turns them
into 0-based ranges in the negotiated position encoding, using the exact text the
result was made from.

Every published diagnostic carries ``data = {"id": ..., "target": ...}``: a stable
id made of its target, code and span (the same for the same problem in every
publish and position encoding). LSP 3.16 clients send ``data`` back unchanged with
a code action request, and the server finds its diagnostic by it
(``exportlens.server.features.actions``); the message is free for the client to
rewrite (ALE turns its newlines into spaces).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable

from lsprotocol import types
from pygls import uris

from exportlens.core.model.results import Diagnostic, Related, docs_anchor
from exportlens.core.model.views import at_declaration
from exportlens.core.trace import mark
from exportlens.server import notebooks
from exportlens.server.positions import byte_column_to_units, split_lines, units
from exportlens.server.state import Published

if TYPE_CHECKING:
    from exportlens.server.host import Host
    from exportlens.server.state import DocumentState

log = logging.getLogger(__name__)

SOURCE = "exportlens"
SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}
PULL_WAIT_S = 600.0  # a pull waits for a running export at most this long


def lsp_range(
    lines: list[str],
    line: int,
    column: int,
    end_line: int | None,
    end_column: int | None,
    encoding: str,
) -> types.Range:
    """A core (1-based, UTF-8 byte) span as an LSP range; no end means to the end of the line."""
    last = max(0, len(lines) - 1)
    start_line = min(max(0, line - 1), last)
    text = lines[start_line] if lines else ""
    if end_line is None or end_column is None:
        first = byte_column_to_units(text, column - 1, encoding)
        if column <= 1:
            # Column 1 without an end is "this line": skip the indentation.
            first = units(text[: len(text) - len(text.lstrip())], encoding)
        end = types.Position(start_line, units(text, encoding))
        return types.Range(types.Position(start_line, first), end)
    start = types.Position(start_line, byte_column_to_units(text, column - 1, encoding))
    stop_line = min(max(0, end_line - 1), last)
    stop_text = lines[stop_line] if lines else ""
    stop = types.Position(stop_line, byte_column_to_units(stop_text, end_column - 1, encoding))
    if (stop.line, stop.character) < (start.line, start.character):
        stop = types.Position(start_line, units(text, encoding))
    return types.Range(start, stop)


def _related(item: Related, own_path: str, own_lines: list[str], encoding: str, read: Callable[[str], list[str]]) -> types.DiagnosticRelatedInformation:
    lines = own_lines if item.path == own_path else read(item.path)
    return types.DiagnosticRelatedInformation(
        location=types.Location(uri=uris.from_fs_path(item.path) or item.path, range=lsp_range(lines, item.line, item.column, None, None, encoding)),
        message=item.message,
    )


def read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return split_lines(f.read())
    except OSError:
        return [""]


def stable_id(diagnostic: Diagnostic) -> str:
    """``target|code|line:column-end_line:end_column`` of the diagnostic as published
    (1-based lines, UTF-8 byte columns: independent of the position encoding)."""
    d = diagnostic
    end = f"{d.end_line}:{d.end_column}" if d.end_line is not None and d.end_column is not None else ""
    return f"{d.target or ''}|{d.code}|{d.line}:{d.column}-{end}"


def to_lsp(
    diagnostic: Diagnostic,
    lines: list[str],
    path: str,
    encoding: str,
    read: Callable[[str], list[str]] = read_lines,
    id: str | None = None,
) -> types.Diagnostic:
    data: dict[str, str] = {"id": id or stable_id(diagnostic)}
    if diagnostic.target:
        data["target"] = diagnostic.target
    related = [_related(r, path, lines, encoding, read) for r in diagnostic.related]
    return types.Diagnostic(
        range=lsp_range(lines, diagnostic.line, diagnostic.column, diagnostic.end_line, diagnostic.end_column, encoding),
        message=diagnostic.message,
        severity=SEVERITY.get(diagnostic.severity, types.DiagnosticSeverity.Error),
        code=diagnostic.code,
        code_description=types.CodeDescription(href=docs_anchor(diagnostic.code)),
        source=SOURCE,
        related_information=related or None,
        data=data,
    )


# ---------------------------------------------------------------- delivery


def publish(server: Host, state: DocumentState) -> None:
    """Convert the state's result, then push it (or ask a pull client to pull again)."""
    disabled = server.settings.diagnostics
    encoding = str(server.workspace.position_encoding or "utf-16")
    published: list[Published] = []
    ids: dict[str, int] = {}
    found_here = list(state.result.diagnostics) if state.result is not None else []
    if state.notice is not None:
        found_here.append(state.notice)  # an untrusted folder's notice (``features/untrusted``)
    if found_here:
        for found in found_here:
            # A line in a local module is published there (``views``); here it
            # stands at the target that found it, never at the module's line number.
            d = at_declaration(found, state.path)
            if d is None or not disabled.enabled(d.code):
                continue
            key = stable_id(d)
            ids[key] = ids.get(key, 0) + 1
            id = key if ids[key] == 1 else f"{key}#{ids[key]}"  # the same span twice: two messages
            try:
                published.append(Published(id, to_lsp(d, state.result_lines, state.path, encoding, id=id), found))
            except Exception:  # noqa: BLE001 - one odd diagnostic must not hide the others
                log.exception("cannot convert diagnostic %r", d)
    state.published = published
    items = [p.lsp for p in published]
    server.publish_serial += 1
    state.result_id = f"{state.uri}@{state.result_version}:{server.publish_serial}"
    view = server.notebooks.get(state.uri)
    if server.client.pull_diagnostics:
        server.workspace_diagnostic_refresh(None)
    elif view is not None:  # a notebook's are published on its cells
        for cell, in_cell in notebooks.diagnostics_by_cell(view, items).items():
            server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell, diagnostics=in_cell))
    else:
        server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=state.uri, diagnostics=items, version=state.result_version))
    mark(f"server: diagnostics of version {state.result_version} published")


def clear(server: Host, uri: str) -> None:
    """The document closed (or stopped declaring targets): show nothing for it."""
    if not server.client.pull_diagnostics:
        server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


async def pull(server: Host, params: types.DocumentDiagnosticParams) -> types.DocumentDiagnosticReport:
    uri = params.text_document.uri
    notebook = server.workspace.get_notebook_document(cell_uri=uri) if not uri.startswith("file:") else None
    if notebook is not None:
        return await _pull_cell(server, notebook.uri, uri)
    state = server.documents.get(uri)
    if state is None:
        return types.RelatedFullDocumentDiagnosticReport(items=[])
    try:
        # Answer for the buffer as it is now: wait for the export already scheduled.
        await asyncio.wait_for(server.scheduler.settled(uri), PULL_WAIT_S)
    except asyncio.TimeoutError:
        pass
    state = server.documents.get(uri) or state
    if state.result_id is not None and params.previous_result_id == state.result_id:
        return types.RelatedUnchangedDocumentDiagnosticReport(result_id=state.result_id)
    return types.RelatedFullDocumentDiagnosticReport(items=[p.lsp for p in state.published], result_id=state.result_id)


async def _pull_cell(server: Host, notebook_uri: str, cell_uri: str) -> types.DocumentDiagnosticReport:
    """A notebook cell's: its notebook's, once the export scheduled settles, in the cell.
    Always in full: the cells' places move with edits that leave the module as it was."""
    try:
        await asyncio.wait_for(server.scheduler.settled(notebook_uri), PULL_WAIT_S)
    except asyncio.TimeoutError:
        pass
    state, view = server.documents.get(notebook_uri), server.notebooks.get(notebook_uri)
    if state is None or view is None:
        return types.RelatedFullDocumentDiagnosticReport(items=[])
    return types.RelatedFullDocumentDiagnosticReport(items=notebooks.diagnostics_by_cell(view, [p.lsp for p in state.published]).get(cell_uri, []))


def register(server: Host) -> None:
    """Called from ``initialize`` once we know the client can pull."""
    options = types.DiagnosticOptions(identifier=SOURCE, inter_file_dependencies=True, workspace_diagnostics=False)

    @server.feature(types.TEXT_DOCUMENT_DIAGNOSTIC, options)
    async def on_diagnostic(ls: Host, params: types.DocumentDiagnosticParams) -> types.DocumentDiagnosticReport:
        try:
            return await pull(ls, params)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("textDocument/diagnostic failed")
            return types.RelatedFullDocumentDiagnosticReport(items=[])
