"""``textDocument/codeAction``: quick fixes (kind ``quickfix``) for the diagnostics
the server published.

The fixes themselves are ``exportlens.core.fixes``' (torch-free, LSP-free); this
module only decides *when* to offer them and turns their edits into a
``WorkspaceEdit``:

* only for a diagnostic published for this document (a model file's own, or, in an
  open model module, the view's at its lines); a diagnostic shown in the declaring
  file at the target's line but living in a module gets its fix in the module;
* only while the buffer is exactly the text the result was made from
  (``state.result_lines``): an edit computed for other text would land on the wrong
  characters, and a fix for a diagnostic that may already be gone is not a fix;
* edits converted from the core's 1-based lines and UTF-8 byte columns to the
  negotiated position encoding with ``exportlens.server.positions``, against that
  same text; a versioned ``documentChanges`` edit when the client takes one, so the
  client refuses it too if the buffer moved on meanwhile.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from lsprotocol import types

from exportlens.core.fixes import Fix, fixes_for
from exportlens.server.features.diagnostics import lsp_range
from exportlens.server.positions import byte_column_to_units, split_lines

if TYPE_CHECKING:
    from exportlens.server.host import Host
    from exportlens.server.state import DocumentState

log = logging.getLogger(__name__)

KIND = types.CodeActionKind.QuickFix


def _wants_quickfix(only: Sequence[str] | None) -> bool:
    """``context.only`` filters by kind prefix (``quickfix`` matches ``quickfix.x``)."""
    return only is None or any(KIND == k or KIND.startswith(f"{k}.") or k == "" for k in only)


def _position(lines: list[str], line: int, byte_column: int, encoding: str) -> types.Position:
    line0 = min(max(0, line - 1), len(lines) - 1)
    return types.Position(line0, byte_column_to_units(lines[line0], byte_column - 1, encoding))


def _overlaps(a: types.Range, b: types.Range) -> bool:
    return (a.start.line, a.start.character) <= (b.end.line, b.end.character) and (b.start.line, b.start.character) <= (a.end.line, a.end.character)


def _same(a: types.Diagnostic, b: types.Diagnostic) -> bool:
    return a.range == b.range and str(a.code) == str(b.code) and a.message == b.message


def _action(server: Host, state: DocumentState, fix: Fix, published: types.Diagnostic, encoding: str) -> types.CodeAction:
    lines = state.result_lines
    edits = [
        types.TextEdit(types.Range(_position(lines, e.line, e.column, encoding), _position(lines, e.end_line, e.end_column, encoding)), e.new_text)
        for e in fix.edits
    ]
    if server.client.document_changes:
        identifier = types.OptionalVersionedTextDocumentIdentifier(uri=state.uri, version=state.version)
        edit = types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(identifier, edits)])  # type: ignore[list-item]
    else:
        edit = types.WorkspaceEdit(changes={state.uri: edits})
    return types.CodeAction(title=fix.title, kind=KIND, diagnostics=[published], is_preferred=fix.preferred or None, edit=edit)


def code_actions(server: Host, params: types.CodeActionParams) -> list[types.CodeAction]:
    uri = params.text_document.uri
    state = server.documents.get(uri)
    if state is None or state.result is None or not state.published or not _wants_quickfix(params.context.only):
        return []
    source = server.workspace.get_text_document(uri).source
    if split_lines(source) != state.result_lines:
        return []  # the buffer changed since the result: its fixes would be for other text
    encoding = str(server.workspace.position_encoding or "utf-16")
    asked = params.context.diagnostics
    actions: list[types.CodeAction] = []
    for found in state.result.diagnostics:
        if found.path is not None and os.path.realpath(found.path) != os.path.realpath(state.path):
            continue  # shown here at the target's line; its code, and its fix, are in a module
        d = replace(found, path=None)
        # The published diagnostic it became (its range, code and message; not its
        # related locations, which would read other files on the event loop).
        where = lsp_range(state.result_lines, d.line, d.column, d.end_line, d.end_column, encoding)
        # Two targets running the same line publish the same range, code and message:
        # their ``data`` says which target each is.
        same = [p for p in state.published if p.range == where and str(p.code) == d.code and p.message == d.message]
        published = next((p for p in same if isinstance(p.data, dict) and p.data.get("target") == d.target), same[0] if same else None)
        if published is None:
            continue  # not published (a disabled code): nothing to fix in the editor
        if asked and not any(_same(a, published) for a in asked):
            continue
        if not asked and not _overlaps(published.range, params.range):
            continue
        try:
            fixes = fixes_for(source, d, state.result)
        except Exception:  # noqa: BLE001 - a fix that cannot be computed is not offered, the others are
            log.exception("computing fixes for %r failed", d)
            continue
        for f in fixes:
            # One edit fixing the diagnostics of several targets (a class both run) is
            # one action listing them all, not the same entry once per target.
            new = _action(server, state, f, published, encoding)
            twin = next((a for a in actions if a.title == new.title and a.edit == new.edit), None)
            if twin is None:
                actions.append(new)
            elif published not in (twin.diagnostics or []):
                twin.diagnostics = [*(twin.diagnostics or []), published]
                twin.is_preferred = twin.is_preferred and new.is_preferred
    return actions


def register(server: Host) -> None:
    options = types.CodeActionOptions(code_action_kinds=[KIND], resolve_provider=False)

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, options)
    def on_code_action(ls: Host, params: types.CodeActionParams) -> list[types.CodeAction]:
        try:
            return code_actions(ls, params)
        except Exception:
            log.exception("textDocument/codeAction failed")
            return []
