"""An untrusted folder: the notice instead of an export, and ``exportlens.trust``.

Until its folder is trusted (``exportlens.server.trust_gate``) a model file is not run:
no cache lookup, no worker, no preloading. It shows one information diagnostic,
``untrusted-folder``, on its first line; its folder gets one ``window/showMessage``
naming the two ways to trust it (``exportlens trust FOLDER`` in a terminal, the
command ``exportlens.trust`` in the editor, which the diagnostic's quick fix runs).
A module that declares no target, or a ``pyproject.toml``, shows nothing there:
its view would come from running the model files.

``exportlens.trust`` (``folder?``: a folder, a file or a ``file:`` URI; default
every workspace folder, else the folders of the open untrusted files) writes the
trust record and exports the open files at once, as opening them would have.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls import uris

from exportlens.core.model.results import Diagnostic
from exportlens.core.project.files import declares_targets
from exportlens.server.features import diagnostics
from exportlens.server.positions import split_lines
from exportlens.server.state import Mode

if TYPE_CHECKING:
    from exportlens.server.host import Host
    from exportlens.server.state import DocumentState

log = logging.getLogger(__name__)

CODE = "untrusted-folder"
TRUST = "exportlens.trust"


def _message(folder: str) -> str:
    return (
        f"exportlens runs no code in {folder} until you trust this folder: "
        f"run `exportlens trust {folder}` in a terminal, or the command {TRUST} in the editor (the quick fix here)"
    )


def hold(server: Host, state: DocumentState) -> None:
    """``state``'s folder is not trusted: show the notice instead of a result."""
    document = server.workspace.get_text_document(state.uri)
    text, version = document.source, document.version
    folder = server.trust.folder_of(state.path)
    had = state.result is not None or bool(state.published)
    state.drop_result()
    state.result_lines, state.result_version = split_lines(text), version
    if state.pyproject or not declares_targets(state.path, text):
        if not state.pyproject:
            state.enter(Mode.IDLE, "declares no target; its folder is not trusted")
        state.notice = None
        if had:
            diagnostics.publish(server, state)
        return
    state.enter(Mode.MODEL, "declares targets; its folder is not trusted")
    state.notice = Diagnostic(code=CODE, message=_message(folder), line=1)
    diagnostics.publish(server, state)
    if folder not in server.trust.told:  # once per folder: the diagnostic is in every file, at every edit
        server.trust.told.add(folder)
        server.show_once(_message(folder).replace(" (the quick fix here)", ""), types.MessageType.Info)


def action(server: Host, state: DocumentState, named: types.Diagnostic) -> types.CodeAction:
    """The quick fix of the notice: run ``exportlens.trust`` for its folder."""
    folder = server.trust.folder_of(state.path)
    title = f"Trust {folder} and export its models ({TRUST})"
    return types.CodeAction(
        title=title,
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[named],
        is_preferred=True,
        command=types.Command(title=title, command=TRUST, arguments=[folder]),
    )


def _folder_argument(args: tuple[Any, ...]) -> str | None:
    value = args[0] if args else None
    if isinstance(value, dict):
        value = value.get("folder") or value.get("uri")
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        from pygls.exceptions import JsonRpcInvalidParams

        raise JsonRpcInvalidParams(f"{TRUST}: expected a folder, a file or a file: URI, got {value!r}")
    return uris.to_fs_path(value) if value.startswith("file:") else value


def trust_command(server: Host, args: tuple[Any, ...]) -> dict[str, Any]:
    """``exportlens.trust``: record the folders, then run what opening the files would have."""
    from pygls.exceptions import JsonRpcInvalidParams

    from exportlens.core.project.trust import TrustError

    given = _folder_argument(args)
    if given is not None:
        wanted = [server.trust.folder_of(given) if not os.path.isdir(given) else given]
    else:
        wanted = list(server.trust.folders) or sorted({server.trust.folder_of(s.path) for s in server.documents.values() if s.notice is not None})
    if not wanted:
        raise JsonRpcInvalidParams(f"{TRUST}: no folder to trust (give one as the argument)")
    trusted = []
    for folder in wanted:
        try:
            trusted.append(server.trust.trust(folder))
        except TrustError as e:
            server.show_once(f"exportlens: cannot trust {folder}: {e}", types.MessageType.Error)
            raise JsonRpcInvalidParams(f"{TRUST}: {e}") from e
    server.log_message(f"exportlens: trusted {', '.join(trusted)}; exporting its open models", types.MessageType.Info)
    for state in server.documents.values():
        if state.notice is not None and server.trust.allows(state.path):
            state.notice = None
            diagnostics.publish(server, state)  # the notice goes now; the export's result follows
    server.reexport_open()
    server.warm()
    return {"trusted": trusted}
