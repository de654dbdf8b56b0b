"""``textDocument/codeAction``: quick fixes (kind ``quickfix``) for the diagnostics
the server published.

The fixes themselves are ``exportlens.core.fixes``' (torch-free, LSP-free), each
verified by a job before it is offered (``server/verification``); this module only
decides *when* to offer them and turns their edits into a ``WorkspaceEdit``:

* only the fixes verified for the very result that is shown; a request that comes
  while they are being verified waits for them (``VERIFY_WAIT_S`` at most);

* only for a diagnostic published for this document (a model file's own, or, in an
  open model module, the view's at its lines); a diagnostic shown in the declaring
  file at the target's line but living in a module gets its fix in the module;
* the client's diagnostic is matched to the published one by its ``data`` id, else
  its range and code (:func:`asked_for`), never by its message;
* only while the buffer is exactly the text the result was made from
  (``state.result_lines``): an edit computed for other text would land on the wrong
  characters, and a fix for a diagnostic that may already be gone is not a fix;
* edits converted from the core's 1-based lines and UTF-8 byte columns to the
  negotiated position encoding with ``exportlens.server.positions``, against that
  same text; a versioned ``documentChanges`` edit when the client takes one, so the
  client refuses it too if the buffer moved on meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls import uris

from exportlens.core.fixes import Fix
from exportlens.core.model.results import Diagnostic
from exportlens.server.features import untrusted
from exportlens.server.positions import byte_column_to_units, split_lines

if TYPE_CHECKING:
    from exportlens.server.host import Host
    from exportlens.server.state import DocumentState, Published

log = logging.getLogger(__name__)

KIND = types.CodeActionKind.QuickFix
VERIFY_WAIT_S = 30.0  # how long a request for fixes waits for their verification


def _wants_quickfix(only: Sequence[str] | None) -> bool:
    """``context.only`` filters by kind prefix (``quickfix`` matches ``quickfix.x``)."""
    return only is None or any(KIND == k or KIND.startswith(f"{k}.") or k == "" for k in only)


def _position(lines: list[str], line: int, byte_column: int, encoding: str) -> types.Position:
    line0 = min(max(0, line - 1), len(lines) - 1)
    return types.Position(line0, byte_column_to_units(lines[line0], byte_column - 1, encoding))


def _overlaps(a: types.Range, b: types.Range) -> bool:
    return (a.start.line, a.start.character) <= (b.end.line, b.end.character) and (b.start.line, b.start.character) <= (a.end.line, a.end.character)


def _data_id(d: types.Diagnostic) -> str | None:
    return d.data.get("id") if isinstance(d.data, dict) and isinstance(d.data.get("id"), str) else None


def _same_code(asked: types.Diagnostic, published: types.Diagnostic) -> bool:
    return asked.code is None or str(asked.code) == str(published.code)


def asked_for(asked: types.Diagnostic, published: Sequence[Published]) -> list[Published]:
    """The published diagnostics a client's diagnostic stands for, never by its message
    (a client may rewrite it: ALE turns newlines into spaces):

    1. its ``data.id``, which LSP 3.16 clients send back unchanged;
    2. else its range and code (a client that drops ``data``): every target's, when
       two targets publish the same line;
    3. else its code on the same first line, overlapping: a client that counts the
       columns its own way (bytes for UTF-16 code units, or a whole-line region).
    """
    wanted = _data_id(asked)
    if wanted is not None:
        found = [p for p in published if p.id == wanted]
        if found:
            return found
    found = [p for p in published if p.lsp.range == asked.range and _same_code(asked, p.lsp)]
    if found:
        return found
    return [p for p in published if p.lsp.range.start.line == asked.range.start.line and _same_code(asked, p.lsp) and _overlaps(p.lsp.range, asked.range)]


def _lines_of(server: Host, state: DocumentState, path: str) -> tuple[str, list[str], int | None] | None:
    """The URI, the lines and the version of the file an edit is in: this document's
    are the result's text; another's the editor's buffer, else the saved file."""
    if path == os.path.realpath(state.path):
        return state.uri, state.result_lines, state.version
    for other in server.documents.values():
        if os.path.realpath(other.path) == path:
            document = server.workspace.get_text_document(other.uri)
            return other.uri, split_lines(document.source), document.version
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return uris.from_fs_path(path) or path, split_lines(f.read()), None
    except (OSError, UnicodeDecodeError):
        return None


def _action(server: Host, state: DocumentState, fix: Fix, diagnostic: types.Diagnostic, encoding: str) -> types.CodeAction | None:
    by_file: dict[str, list[types.TextEdit]] = {}
    versions: dict[str, int | None] = {}
    for e in fix.edits:
        where = _lines_of(server, state, os.path.realpath(e.path) if e.path else os.path.realpath(state.path))
        if where is None:
            return None
        uri, lines, version = where
        versions[uri] = version
        by_file.setdefault(uri, []).append(types.TextEdit(types.Range(_position(lines, e.line, e.column, encoding), _position(lines, e.end_line, e.end_column, encoding)), e.new_text))
    if server.client.document_changes:
        changes = [
            types.TextDocumentEdit(types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=versions[uri]), edits)  # type: ignore[arg-type]
            for uri, edits in by_file.items()
        ]
        edit = types.WorkspaceEdit(document_changes=changes)  # type: ignore[arg-type]
    else:
        edit = types.WorkspaceEdit(changes=by_file)  # type: ignore[arg-type]
    return types.CodeAction(title=fix.title, kind=KIND, diagnostics=[diagnostic], is_preferred=fix.preferred or None, edit=edit)


def _same(verified: Diagnostic, published: Diagnostic) -> bool:
    """The result's diagnostic a fix was verified for is the one published (a model
    module's view shows the declaring file's, without its path)."""
    return (verified.code, verified.line, verified.column, verified.target, verified.message) == (
        published.code,
        published.line,
        published.column,
        published.target,
        published.message,
    )


def code_actions(server: Host, params: types.CodeActionParams) -> list[types.CodeAction]:
    uri = params.text_document.uri
    state = server.documents.get(uri)
    if state is not None and state.notice is not None and _wants_quickfix(params.context.only):
        # An untrusted folder: its one action trusts it (``features/untrusted``).
        notice = next((p for p in state.published if p.found is state.notice), None)
        if notice is None:
            return []
        theirs = [d for d in params.context.diagnostics if asked_for(d, [notice])]
        if theirs or (not params.context.diagnostics and _overlaps(notice.lsp.range, params.range)):
            return [untrusted.action(server, state, theirs[0] if theirs else notice.lsp)]
        return []
    if state is None or state.result is None or not state.published or not _wants_quickfix(params.context.only):
        return []
    source = server.workspace.get_text_document(uri).source
    if split_lines(source) != state.result_lines:
        return []  # the buffer changed since the result: its fixes would be for other text
    encoding = str(server.workspace.position_encoding or "utf-16")
    # Each published diagnostic to fix, with the diagnostic the action names: the
    # client's own where it sent one (it knows its copy), else the published one.
    chosen: dict[str, tuple[Published, types.Diagnostic]] = {}
    if params.context.diagnostics:
        for asked in params.context.diagnostics:
            for p in asked_for(asked, state.published):
                chosen.setdefault(p.id, (p, asked))
    else:
        chosen = {p.id: (p, p.lsp) for p in state.published if _overlaps(p.lsp.range, params.range)}
    offered = state.fixes if state.fixes_for is state.result else []  # verified for this very result, or none yet
    actions: list[types.CodeAction] = []
    for p, named in chosen.values():
        found = p.found
        if found.path is not None and os.path.realpath(found.path) != os.path.realpath(state.path):
            continue  # shown here at the target's line; its code, and its fix, are in a module
        for o in offered:
            if not _same(o.fix.diagnostic, found):
                continue
            # One edit fixing the diagnostics of several targets (a class both run) is
            # one action listing them all, not the same entry once per target.
            new = _action(server, state, o.fix, named, encoding)
            if new is None:
                continue
            twin = next((a for a in actions if a.title == new.title and a.edit == new.edit), None)
            if twin is None:
                actions.append(new)
            elif named not in (twin.diagnostics or []):
                twin.diagnostics = [*(twin.diagnostics or []), named]
                twin.is_preferred = twin.is_preferred and new.is_preferred
    return actions


def register(server: Host) -> None:
    options = types.CodeActionOptions(code_action_kinds=[KIND], resolve_provider=False)

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, options)
    async def on_code_action(ls: Host, params: types.CodeActionParams) -> list[types.CodeAction]:
        try:
            await _verified(ls, params.text_document.uri)
            return code_actions(ls, params)
        except Exception:
            log.exception("textDocument/codeAction failed")
            return []


async def _verified(server: Host, uri: str) -> None:
    """A request for the fixes of a result still being verified waits for them, at
    most ``VERIFY_WAIT_S`` (the diagnostics went out already: only the one who asked
    for fixes waits). A newer edit cancels the verification, and the wait with it."""
    state = server.documents.get(uri)
    task = state.fixing if state is not None else None
    if task is None or task.done():
        return
    try:
        await asyncio.wait_for(asyncio.shield(task), VERIFY_WAIT_S)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        pass
    except Exception:  # noqa: BLE001 - its own failure is logged where it ran
        pass
