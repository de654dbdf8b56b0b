"""The server with the plainest LSP clients: push diagnostics only (no pull), no
work-done progress, no ``workspace/configuration``, UTF-16 positions only (no
``general.positionEncodings``), plain text only (``hover.contentFormat`` without
markdown). Helix, Zed, Emacs (eglot), Vim (ALE), Sublime Text's LSP package or
LSP4IJ may be any of these. The server must work without ever asking for what the
client did not offer, with columns counted in UTF-16 code units, and write every
``MarkupContent`` (hover, inlay-hint tooltips) as plain text: the same information,
no fences, emphasis or code spans a plain-text client would show as characters.

Besides a hand-made plain client, the capabilities exactly as two real plain-text
clients send them: Vim's ALE 3.3 and Emacs' eglot 1.9 without markdown-mode
(``tests/editors`` drives both editors themselves).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.protocol import default_converter

from tests.server.lsp_client import SERVE, Doc, make_client

MODEL = """import torch


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("步数", torch.zeros(1))

    def forward(self, x):
        self.步数.add_(1)
        y = x * 2
        return y


model = Counter()
example_args = (torch.randn(3),)
"""

PLAIN = types.ClientCapabilities(
    text_document=types.TextDocumentClientCapabilities(
        synchronization=types.TextDocumentSyncClientCapabilities(did_save=True),
        publish_diagnostics=types.PublishDiagnosticsClientCapabilities(related_information=True),
        hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.PlainText]),
    ),
)

# vim-ale 3.3.0, autoload/ale/lsp.vim (s:SendInitMessage), as Debian 12 ships it.
ALE = {
    "workspace": {
        "applyEdit": False,
        "didChangeConfiguration": {"dynamicRegistration": False},
        "symbol": {"dynamicRegistration": False},
        "workspaceFolders": False,
        "configuration": False,
    },
    "textDocument": {
        "synchronization": {"dynamicRegistration": False, "willSave": False, "willSaveWaitUntil": False, "didSave": True},
        "completion": {
            "dynamicRegistration": False,
            "completionItem": {"snippetSupport": False, "commitCharactersSupport": False, "documentationFormat": ["plaintext"], "deprecatedSupport": False, "preselectSupport": False},
            "contextSupport": False,
        },
        "hover": {"dynamicRegistration": False, "contentFormat": ["plaintext"]},
        "references": {"dynamicRegistration": False},
        "documentSymbol": {"dynamicRegistration": False, "hierarchicalDocumentSymbolSupport": False},
        "definition": {"dynamicRegistration": False, "linkSupport": False},
        "typeDefinition": {"dynamicRegistration": False},
        "implementation": {"dynamicRegistration": False, "linkSupport": False},
        "publishDiagnostics": {"relatedInformation": True},
        "codeAction": {"dynamicRegistration": False, "codeActionLiteralSupport": {"codeActionKind": {"valueSet": []}}},
        "rename": {"dynamicRegistration": False},
    },
}

# eglot 1.9 (Debian 12's elpa-eglot) on Emacs 28 without markdown-mode: eglot.el,
# eglot-client-capabilities; hover is plain text because gfm-view-mode is not there.
EGLOT = {
    "workspace": {
        "applyEdit": True,
        "executeCommand": {"dynamicRegistration": False},
        "workspaceEdit": {"documentChanges": True},
        "didChangeWatchedFiles": {"dynamicRegistration": True},
        "symbol": {"dynamicRegistration": False},
        "configuration": True,
        "workspaceFolders": True,
    },
    "textDocument": {
        "synchronization": {"dynamicRegistration": False, "willSave": True, "willSaveWaitUntil": True, "didSave": True},
        "completion": {"dynamicRegistration": False, "completionItem": {"snippetSupport": False, "deprecatedSupport": True, "tagSupport": {"valueSet": [1]}}, "contextSupport": True},
        "hover": {"dynamicRegistration": False, "contentFormat": ["plaintext"]},
        "signatureHelp": {"dynamicRegistration": False, "signatureInformation": {"parameterInformation": {"labelOffsetSupport": True}, "activeParameterSupport": True}},
        "references": {"dynamicRegistration": False},
        "definition": {"dynamicRegistration": False, "linkSupport": True},
        "codeAction": {
            "dynamicRegistration": False,
            "codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix", "refactor", "refactor.extract", "refactor.inline", "refactor.rewrite", "source", "source.organizeImports"]}},
            "isPreferredSupport": True,
        },
        "publishDiagnostics": {"relatedInformation": False, "codeDescriptionSupport": False, "tagSupport": {"valueSet": [1, 2]}},
    },
    "experimental": {},
}

# What a plain-text MarkupContent must never hold: the server's own markdown.
MARKDOWN_SYNTAX = re.compile(r"```|\*\*|`|^---$", re.M)


def as_capabilities(raw: dict[str, Any]) -> types.ClientCapabilities:
    return default_converter().structure(raw, types.ClientCapabilities)


def assert_plain(content: Any, what: str) -> str:
    assert isinstance(content, types.MarkupContent), f"{what}: {content!r}"
    assert content.kind == types.MarkupKind.PlainText, f"{what} is {content.kind}: {content.value}"
    assert not MARKDOWN_SYNTAX.search(content.value), f"{what} holds markdown syntax:\n{content.value}"
    return content.value


@pytest.mark.asyncio
@pytest.mark.parametrize("profile", ["plain", "ale-3.3", "eglot-1.9"])
async def test_a_push_only_utf16_plain_text_client(profile: str, tmp_path: Path) -> None:
    caps = {"plain": PLAIN, "ale-3.3": as_capabilities(ALE), "eglot-1.9": as_capabilities(EGLOT)}[profile]
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / "counter.py"
    path.write_text(MODEL, encoding="utf-8")
    asked: list[str] = []
    client = make_client(asked)
    await client.start_io(sys.executable, *SERVE, env=dict(os.environ, PYTHONWARNINGS="ignore"), cwd=tmp_path)
    try:
        result = await client.initialize_session(types.InitializeParams(capabilities=caps, root_uri=tmp_path.as_uri(), initialization_options={"exportlens": {}}))
        assert result.capabilities.position_encoding in (None, types.PositionEncodingKind.Utf16)
        assert result.capabilities.diagnostic_provider is None  # nothing to pull from: it pushes

        doc = Doc(client, path)
        found = await client.diagnostics_for(doc.uri, doc.open())
        [mutation] = [d for d in found if d.code == "mutation/buffer"]
        line = doc.line_of("self.步数.add_(1)")
        # UTF-16 code units: 步 and 数 are one unit each (three bytes each in UTF-8).
        assert (mutation.range.start.line, mutation.range.start.character) == (line, 8)
        assert (mutation.range.end.line, mutation.range.end.character) == (line, 8 + len("self.步数.add_(1)"))

        # Hover: plain text, the same table as aligned lines.
        hover = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(doc.uri), types.Position(line, 8 + len("self.步数.ad"))))
        assert hover is not None
        text = assert_plain(hover.contents, "the in-place call's hover")
        assert text.startswith("in-place update · Counter\n\n"), text
        assert re.search(r"^add: BUFFER_MUTATION target='步数'\s+float32\[1\] cpu$", text, re.M), text
        assert re.search(r"^b_\S+: BUFFER target='步数' persistent=True\s+float32\[1\] cpu$", text, re.M), text
        hover = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(doc.uri), types.Position(doc.line_of("class Counter"), 7)))
        assert hover is not None
        text = assert_plain(hover.contents, "the class line's hover")
        assert text.startswith("Counter · export ok") and "\n# inputs\n" in text and "\n# outputs\n" in text, text

        # Inlay-hint tooltips: the same markup as hover (the LSP gives them no format of their own).
        hints = await client.text_document_inlay_hint_async(
            types.InlayHintParams(types.TextDocumentIdentifier(doc.uri), types.Range(types.Position(0, 0), types.Position(len(doc.text.split("\n")), 0)))
        )
        by_line = {h.position.line: h for h in hints or []}
        hint = by_line[doc.line_of("y = x * 2")]
        assert hint.label == "float32[3]"
        tooltip = assert_plain(hint.tooltip, "the inlay hint's tooltip")
        assert tooltip == "Counter: mul = aten.mul.Tensor, float32[3]", tooltip

        version = doc.replace("return y", "return y + 1")  # an edit: pushed again
        doc.save()
        again = await client.diagnostics_for(doc.uri, version)
        assert [d.code for d in again] == ["mutation/buffer"]
    finally:
        await client.shutdown_session()
        await client.stop()
    # Nothing the client did not offer was ever asked of it.
    never = {types.WINDOW_WORK_DONE_PROGRESS_CREATE, types.PROGRESS, types.WORKSPACE_DIAGNOSTIC_REFRESH, types.WORKSPACE_INLAY_HINT_REFRESH, types.WORKSPACE_CODE_LENS_REFRESH}
    if not (caps.workspace and caps.workspace.configuration):
        never.add(types.WORKSPACE_CONFIGURATION)
    assert not never & set(asked), asked


@pytest.mark.asyncio
async def test_a_markdown_client_still_gets_markdown(tmp_path: Path) -> None:
    # The same model for a client that lists markdown first: fences and emphasis.
    caps = types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown, types.MarkupKind.PlainText]))
    )
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / "counter.py"
    path.write_text(MODEL, encoding="utf-8")
    client = make_client()
    await client.start_io(sys.executable, *SERVE, env=dict(os.environ, PYTHONWARNINGS="ignore"), cwd=tmp_path)
    try:
        await client.initialize_session(types.InitializeParams(capabilities=caps, root_uri=tmp_path.as_uri(), initialization_options={"exportlens": {}}))
        doc = Doc(client, path)
        await client.diagnostics_for(doc.uri, doc.open())
        line = doc.line_of("self.步数.add_(1)")
        hover = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(doc.uri), types.Position(line, 8 + len("self.步数.ad"))))
        assert hover is not None and isinstance(hover.contents, types.MarkupContent)
        assert hover.contents.kind == types.MarkupKind.Markdown
        assert hover.contents.value.startswith("**in-place update** · `Counter`\n\n```text\n"), hover.contents.value
        hints = await client.text_document_inlay_hint_async(
            types.InlayHintParams(types.TextDocumentIdentifier(doc.uri), types.Range(types.Position(0, 0), types.Position(len(doc.text.split("\n")), 0)))
        )
        [tooltip] = [h.tooltip for h in hints or [] if h.position.line == doc.line_of("y = x * 2")]
        assert isinstance(tooltip, types.MarkupContent) and tooltip.kind == types.MarkupKind.Markdown
        assert tooltip.value == "Counter: `mul` = `aten.mul.Tensor`, float32[3]", tooltip.value
    finally:
        await client.shutdown_session()
        await client.stop()
