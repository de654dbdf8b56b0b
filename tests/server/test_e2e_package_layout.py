"""A package-layout project in the editor (tests/corpus/tinylm): opening a model
module that declares no target shows, from the cache, what the targets that
import it found at its lines, and hover on its tensors; the declaring file shows a
module's diagnostic at the target's line, never at the module's line number."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lsprotocol import types

from tests.conftest import ROOT, run_cli
from tests.server.lsp_client import Doc, running_server

pytestmark = pytest.mark.asyncio

CORPUS = ROOT / "tests" / "corpus" / "tinylm"


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "tinylm"
    shutil.copytree(CORPUS, project, ignore=shutil.ignore_patterns("__pycache__"))
    return project


async def test_a_model_module_shows_its_targets_results_from_the_cache(tmp_path: Path) -> None:
    project = _project(tmp_path)
    cache = tmp_path / "cache"
    # `check` fills the cache; the editor must not export anything again.
    proc = run_cli("check", "--cache-dir", str(cache), str(project), cwd=project)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    pkg = project / "tinylm"

    async with running_server("neovim", project, {"cache_dir": str(cache)}) as (client, _):
        gpt = Doc(client, pkg / "gpt.py")
        gpt.open()
        found = await client.diagnostics_for(gpt.uri, 1)
        assert [(d.code, d.range.start.line) for d in found] == [("data-dependent", gpt.line_of("if logits.abs().max() > 100:"))]
        [back] = [r for r in found[0].related_information or [] if r.location.uri.endswith("/targets.py")]
        targets_text = (pkg / "targets.py").read_text()
        assert back.location.range.start.line == targets_text[: targets_text.index("def gated")].count("\n")
        assert "`gated`" in back.message

        attention = Doc(client, pkg / "nn" / "layers" / "attention.py")
        attention.open()
        await client.diagnostics_for(attention.uri, 1)
        line = attention.line_of("self.calls.add_(1)")
        column = attention.text.split("\n")[line].index("calls")
        hover = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(attention.uri), attention.position(line, column)))
        assert hover is not None and isinstance(hover.contents, types.MarkupContent)
        assert "h.0.attn.calls" in hover.contents.value and "h.1.attn.calls" in hover.contents.value
        assert "BUFFER" in hover.contents.value and "make_gpt" in hover.contents.value

        for module in (gpt, attention):
            status = await client.command("exportlens.status", module.uri)
            assert status["cached"] is True, [m.message for m in client.log_messages]  # every result from the cache
        assert status["state"] == "ok" and [t["name"] for t in status["targets"]] == ["make_gpt"]

        declaring = Doc(client, pkg / "targets.py")
        declaring.open()
        [d] = await client.diagnostics_for(declaring.uri, 1)
        # At the target that found it, naming the module's line (44 in targets.py is past its end).
        assert d.code == "data-dependent" and d.range.start.line == declaring.line_of("def gated")
        assert d.message.startswith(f"gpt.py:{gpt.line_of('if logits.abs().max() > 100:') + 1}: ")
        assert d.related_information and d.related_information[0].location.uri == gpt.uri

        # A save of the module makes its view again (an export: the cache has not seen it).
        before = len(client.publishes(gpt.uri))
        gpt.replace("class GatedGPT(GPT):", "# a comment moves the class down\nclass GatedGPT(GPT):")
        gpt.save()
        moved = gpt.line_of("if logits.abs().max() > 100:")

        def republished() -> list[types.Diagnostic] | None:
            later = client.publishes(gpt.uri)[before:]
            return next((list(p.diagnostics) for p in reversed(later) if [x.range.start.line for x in p.diagnostics] == [moved]), None)

        assert [x.code for x in await client.until(republished, "the module's view after its save")] == ["data-dependent"]
