"""Through the real server, a package-layout project (tests/corpus/tinylm): comment
lines saved into a model module the targets import move the module's diagnostic, its
hovers and the declaring file's references to it, and no export runs (no work-done
progress, which every worker export reports); a code edit of the module exports."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lsprotocol import types

from tests.conftest import ROOT
from tests.server.lsp_client import Doc, RecordingClient, running_server

pytestmark = pytest.mark.asyncio

CORPUS = ROOT / "tests" / "corpus" / "tinylm"
COMMENT = "# three lines of comments\n\n# push the classes down\n"


async def _hover(client: RecordingClient, doc: Doc, line: int, word: str) -> str:
    column = doc.text.split("\n")[line].index(word)
    found = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(doc.uri), doc.position(line, column)))
    assert found is not None and isinstance(found.contents, types.MarkupContent), (line, word)
    return found.contents.value


async def test_a_comment_saved_into_a_model_module_moves_its_lines_without_an_export(tmp_path: Path) -> None:
    project = tmp_path / "tinylm"
    shutil.copytree(CORPUS, project, ignore=shutil.ignore_patterns("__pycache__"))
    pkg = project / "tinylm"
    async with running_server("neovim", project, {"cache_dir": str(tmp_path / "cache")}) as (client, _):
        declaring = Doc(client, pkg / "targets.py")
        declaring.open()
        [found] = await client.diagnostics_for(declaring.uri, 1)
        factories = Doc(client, pkg / "factories.py")
        factories.open()
        await client.diagnostics_for(factories.uri, 1)
        gpt = Doc(client, pkg / "gpt.py")
        gpt.open()
        [gate] = await client.diagnostics_for(gpt.uri, 1)
        branch = gpt.line_of("if logits.abs().max() > 100:")
        assert gate.code == "data-dependent" and gate.range.start.line == branch
        assert found.message.startswith(f"gpt.py:{branch + 1}: ")
        line = gpt.line_of("x = self.wte(idx) + self.wpe(pos)")
        hover = await _hover(client, gpt, line, "wte")
        assert "wte.weight" in hover and "`make_gpt`" in hover
        exports = len(client.progress_reports)
        assert exports == 2

        gpt.replace("class Block(", COMMENT + "class Block(")
        gpt.save()
        moved = gpt.line_of("if logits.abs().max() > 100:")
        assert moved == branch + 3

        def republished() -> list[types.Diagnostic] | None:
            last = client.publishes(gpt.uri)[-1]
            return list(last.diagnostics) if [d.range.start.line for d in last.diagnostics] == [moved] else None

        [after] = await client.until(republished, "the module's diagnostic at its moved line")
        assert after.code == "data-dependent" and after.message == gate.message

        def declaring_moved() -> types.Diagnostic | None:
            last = client.publishes(declaring.uri)[-1].diagnostics
            return last[0] if last and last[0].message.startswith(f"gpt.py:{moved + 1}: ") else None

        await client.until(declaring_moved, "the declaring file's reference to the moved line")
        assert await _hover(client, gpt, line + 3, "wte") == hover
        assert len(client.progress_reports) == exports  # no export ran

        gpt.replace("logits.clamp(-100, 100)", "logits.clamp(-99, 99)")
        gpt.save()
        await client.until(lambda: len(client.progress_reports) > exports, "an export after a code edit of the module")
