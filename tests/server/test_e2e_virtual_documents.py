"""A notebook as jupyterlab-lsp sends it, through the real server.

The client is what JupyterLab 4.6.6 with jupyterlab-lsp 5.3.0 sent (recorded by a
server that logged its input): its capabilities, a ``rootUri`` and nothing else at
``initialize``, then one ``python`` text document holding the notebook's code
(``tests/core/project/test_virtual_documents.py``'s ``MODEL_VIRTUAL``), at the
notebook's own URI (``"requires_documents_on_disk": false``, as docs/editors.md
configures it) or under ``.virtual_documents/`` (jupyter-lsp's default). The error is
published on the helper's line, the training cell never runs, hover answers on the
model's class, and the fixed helper clears the error. ``tests/editors/test_jupyterlab.py`` does the same in JupyterLab itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from lsprotocol.converters import get_converter

from tests.core.project.test_virtual_documents import MODEL_VIRTUAL
from tests.notebooks import FIXED_HELPER, write_notebook
from tests.server.lsp_client import SERVE, make_client

pytestmark = pytest.mark.asyncio

JUPYTERLAB_LSP: dict[str, Any] = {
    "textDocument": {
        "synchronization": {"dynamicRegistration": True, "willSave": False, "didSave": True, "willSaveWaitUntil": False},
        "rename": {"prepareSupport": False, "honorsChangeAnnotations": False},
        "documentHighlight": {"dynamicRegistration": True},
        "publishDiagnostics": {"tagSupport": {"valueSet": [2, 1]}},
        "completion": {
            "dynamicRegistration": True,
            "completionItem": {"snippetSupport": False, "commitCharactersSupport": True, "documentationFormat": ["markdown", "plaintext"], "deprecatedSupport": True, "preselectSupport": False, "tagSupport": {"valueSet": [1]}},
            "contextSupport": True,
        },
        "signatureHelp": {"dynamicRegistration": True, "signatureInformation": {"documentationFormat": ["markdown", "plaintext"]}},
        "hover": {"dynamicRegistration": True, "contentFormat": ["markdown", "plaintext"]},
        "declaration": {"dynamicRegistration": True, "linkSupport": True},
        "definition": {"dynamicRegistration": True, "linkSupport": True},
        "typeDefinition": {"dynamicRegistration": True, "linkSupport": True},
        "implementation": {"dynamicRegistration": True, "linkSupport": True},
        "documentSymbol": {"dynamicRegistration": True, "tagSupport": {"valueSet": [1]}, "hierarchicalDocumentSymbolSupport": True},
    },
    "workspace": {"didChangeConfiguration": {"dynamicRegistration": True}},
}


@pytest.mark.parametrize("where", ["nb.ipynb", ".virtual_documents/nb.ipynb"])
async def test_jupyterlab_lsp_s_text_of_a_notebook_runs_as_the_notebook(where: str, tmp_path: Path) -> None:
    write_notebook(tmp_path / "nb.ipynb")
    uri = (tmp_path / where).as_uri()
    root = (tmp_path / where).parent.as_uri()
    client = make_client()
    await client.start_io(sys.executable, *SERVE, env=dict(os.environ, PYTHONWARNINGS="ignore", EXPORTLENS_CACHE_DIR=str(tmp_path / ".cache")), cwd=tmp_path)
    try:
        caps = get_converter().structure(JUPYTERLAB_LSP, types.ClientCapabilities)
        await client.initialize_session(types.InitializeParams(capabilities=caps, root_uri=root))
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={}))
        client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=0, text=MODEL_VIRTUAL)))
        [d] = await client.diagnostics_for(uri, 0)
        lines = MODEL_VIRTUAL.split("\n")
        assert (d.code, d.range.start.line, d.range.start.character) == ("data-dependent", lines.index("    if x.sum() > 0:"), 4), d
        assert not (tmp_path / "TRAINED").exists()  # the training cell after the model never ran
        # Hover on the model's class line names the target (JupyterLab asks with Ctrl held).
        hover = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(lines.index("class Net(nn.Module):"), 7)))
        assert hover is not None and "Net" in str(hover.contents), hover

        # The fix, typed in the helper's cell: the extension sends the whole text again.
        helper = lines.index("def helper(x):")
        fixed = "\n".join([*lines[:helper], *FIXED_HELPER.rstrip("\n").split("\n"), *lines[helper + 4 :]])
        change = types.TextDocumentContentChangeWholeDocument(text=fixed)
        client.text_document_did_change(types.DidChangeTextDocumentParams(types.VersionedTextDocumentIdentifier(uri=uri, version=1), [change]))
        assert await client.diagnostics_for(uri, 1) == []
        assert not (tmp_path / "TRAINED").exists()
    finally:
        await client.shutdown_session()
        await client.stop()
