"""What the client can take, read once from its capabilities at ``initialize``.

Features ask the server's :class:`ClientProfile` (``server.client``), never the raw
capabilities: one place decides what "the client takes markdown" or "the client can
be asked to pull" means, and the status command reports the same answers.

Absent means no: the server assumes the plainest client (push diagnostics, no
progress, no configuration requests, plain text) unless the client says otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lsprotocol import types

from exportlens.server.markup import MARKDOWN, PLAIN, Markup


def preferred_markup(formats: Sequence[types.MarkupKind | str] | None) -> Markup:
    """The first of the client's formats (its order is its preference) that the
    server writes; plain text when it names neither, or names none at all."""
    for kind in formats or ():
        if kind == types.MarkupKind.Markdown:
            return MARKDOWN
        if kind == types.MarkupKind.PlainText:
            return PLAIN
    return PLAIN


@dataclass(frozen=True)
class ClientProfile:
    # Hover contents and inlay-hint tooltips. The LSP gives tooltips no format
    # capability of their own: a client whose hover is plain text gets plain tooltips.
    markup: Markup = PLAIN
    # Pull diagnostics only when the client can also be told to pull again: exports
    # finish out of band (a module changed on disk).
    pull_diagnostics: bool = False
    progress: bool = False  # window.workDoneProgress
    configuration: bool = False  # workspace/configuration
    document_changes: bool = False  # versioned WorkspaceEdit.documentChanges
    inlay_hint_refresh: bool = False
    code_lens_refresh: bool = False

    @classmethod
    def read(cls, caps: types.ClientCapabilities) -> ClientProfile:
        text = caps.text_document
        workspace = caps.workspace
        hover = text.hover if text is not None else None
        edit = workspace.workspace_edit if workspace is not None else None
        hints = workspace.inlay_hint if workspace is not None else None
        lenses = workspace.code_lens if workspace is not None else None
        can_pull = text is not None and text.diagnostic is not None
        can_refresh = bool(workspace is not None and workspace.diagnostics is not None and workspace.diagnostics.refresh_support)
        return cls(
            markup=preferred_markup(hover.content_format if hover is not None else None),
            pull_diagnostics=can_pull and can_refresh,
            progress=bool(caps.window is not None and caps.window.work_done_progress),
            configuration=bool(workspace is not None and workspace.configuration),
            document_changes=bool(edit is not None and edit.document_changes),
            inlay_hint_refresh=bool(hints is not None and hints.refresh_support),
            code_lens_refresh=bool(lenses is not None and lenses.refresh_support),
        )
