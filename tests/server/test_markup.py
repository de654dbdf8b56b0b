"""The two markups the server writes, and which one a client gets."""

from __future__ import annotations

from lsprotocol import types

from exportlens.server.client import ClientProfile, preferred_markup
from exportlens.server.markup import MARKDOWN, PLAIN


def test_markdown_helpers_survive_backticks() -> None:
    assert MARKDOWN.code("a`b") == "``a`b``"
    assert MARKDOWN.code("`x") == "`` `x ``"
    fenced = MARKDOWN.block(["```python", "x"])
    assert fenced.startswith("````text\n") and fenced.endswith("\n````")


def test_plain_text_is_the_words_and_the_aligned_lines() -> None:
    assert PLAIN.bold("Counter") == "Counter" and PLAIN.code("a`b") == "a`b"
    assert PLAIN.block(["x: USER_INPUT  float32[3] cpu", "", "s0 ∈ [2, 8]"]) == "x: USER_INPUT  float32[3] cpu\n\ns0 ∈ [2, 8]"
    assert set(PLAIN.rule()) == {"─"}


def test_the_clients_first_format_wins_and_none_means_plain_text() -> None:
    md, pt = types.MarkupKind.Markdown, types.MarkupKind.PlainText
    assert preferred_markup([md, pt]) is MARKDOWN  # VS Code, Neovim, eglot with markdown-mode
    assert preferred_markup([pt, md]) is PLAIN  # the client's order is its preference
    assert preferred_markup([pt]) is PLAIN  # ALE, eglot without markdown-mode
    assert preferred_markup(None) is PLAIN and preferred_markup([]) is PLAIN
    assert preferred_markup(["asciidoc", md]) is MARKDOWN  # an unknown kind is skipped


def test_a_profile_reads_each_capability_it_answers_for() -> None:
    assert ClientProfile.read(types.ClientCapabilities()) == ClientProfile()  # the plainest client
    caps = types.ClientCapabilities(
        window=types.WindowClientCapabilities(work_done_progress=True),
        workspace=types.WorkspaceClientCapabilities(
            configuration=True,
            workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True),
            inlay_hint=types.InlayHintWorkspaceClientCapabilities(refresh_support=True),
            code_lens=types.CodeLensWorkspaceClientCapabilities(refresh_support=True),
            diagnostics=types.DiagnosticWorkspaceClientCapabilities(refresh_support=True),
        ),
        text_document=types.TextDocumentClientCapabilities(
            hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
            diagnostic=types.DiagnosticClientCapabilities(),
        ),
    )
    assert ClientProfile.read(caps) == ClientProfile(
        markup=MARKDOWN,
        pull_diagnostics=True,
        progress=True,
        configuration=True,
        document_changes=True,
        inlay_hint_refresh=True,
        code_lens_refresh=True,
    )
    # Pull only with a way to ask for it again.
    assert caps.workspace is not None and caps.workspace.diagnostics is not None
    caps.workspace.diagnostics.refresh_support = False
    assert not ClientProfile.read(caps).pull_diagnostics
