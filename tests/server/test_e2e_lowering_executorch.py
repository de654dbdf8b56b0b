"""The editor's ``lower = ["executorch"]`` through the real server: each of the four
outcomes at its line (an op outside the XNNPACK delegate, a kernel the runtime lacks,
outputs that differ from eager; a model XNNPACK takes whole has none), the target
hover and code lens summing up delegation, .pte size and planned memory, and the
progress naming the lowering phase."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lsprotocol import types

from tests.server.lsp_client import Doc, RecordingClient, codes, running_server

pytestmark = pytest.mark.asyncio
pytest.importorskip("executorch", reason="the exportlens[executorch] extra is not installed")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lowering"


async def _hover(client: RecordingClient, doc: Doc, line: int) -> str:
    hover = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(doc.uri), types.Position(line, 2)))
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    return str(hover.contents.value)


async def test_executorch_outcomes_at_their_lines_with_hover_lens_and_progress(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "executorch_outcomes.py", tmp_path / "executorch_outcomes.py")
    (tmp_path / "pyproject.toml").write_text("")
    async with running_server("visual-studio-code", tmp_path, {"lower": ["executorch"], "cache": False, "timeout": 900}) as (client, _):
        doc = Doc(client, tmp_path / "executorch_outcomes.py")
        tokens_before = set(client.progress_reports)
        doc.open()
        found = await client.diagnostics_for(doc.uri, 1)
        assert sorted(codes(found), key=lambda c: (c[1], c[0])) == [
            ("lowering/executorch-not-delegated", doc.line_of("running = torch.cumsum(h, dim=-1)")),
            ("lowering/executorch-missing-kernel", doc.line_of("ordered, _ = torch.sort(y, dim=-1)")),
            ("lowering/executorch-not-delegated", doc.line_of("ordered, _ = torch.sort(y, dim=-1)")),
            ("lowering/executorch-not-delegated", doc.line_of("totals = x.cumsum(dim=-1)")),
            ("lowering/executorch-mismatch", doc.line_of("return totals")),
            ("lowering/executorch-error", doc.line_of("return twice(y)")),
            ("lowering/executorch-not-delegated", doc.line_of("return twice(y)")),
        ]
        severities = {d.code: d.severity for d in found}
        assert severities["lowering/executorch-not-delegated"] == types.DiagnosticSeverity.Information
        assert severities["lowering/executorch-missing-kernel"] == types.DiagnosticSeverity.Error

        # The progress said which target was lowering, between its export and its end.
        [token] = set(client.progress_reports) - tokens_before
        reports = client.progress_reports[token]
        await client.until(lambda: reports and isinstance(reports[-1], types.WorkDoneProgressEnd), "the end of the progress")
        messages = [getattr(r, "message", "") for r in reports]
        assert messages.index("exporting Delegated (1/5)") < messages.index("lowering: executorch: Delegated (1/5)") < messages.index("exporting FallsBack (2/5)"), messages

        text = await _hover(client, doc, doc.line_of("class FallsBack"))
        assert "Lowers to ExecuTorch (XNNPACK runs 3 of 4 ops; 1 line falls back, .pte " in text and "planned memory " in text, text
        assert "outputs match (max error" in text and "On portable CPU kernels: `aten::cumsum`" in text, text
        text = await _hover(client, doc, doc.line_of("class HalfSum"))
        assert "outputs DIFFER (max error 2.05e+03, max relative 0.5)" in text and "cumsum  float16  max abs 2.05e+03" in text, text

        lenses = await client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(doc.uri)))
        titles = {lens.range.start.line: lens.command.title for lens in lenses or [] if lens.command is not None and lens.command.title.startswith("ExecuTorch")}
        assert titles[doc.line_of("class Delegated")].startswith("ExecuTorch ✓ XNNPACK runs 3 of 3 ops · .pte "), titles
        assert titles[doc.line_of("class FallsBack")].startswith("ExecuTorch ✓ XNNPACK runs 3 of 4 ops; 1 line falls back · .pte "), titles
        assert titles[doc.line_of("class NeedsSort")].startswith("ExecuTorch ✗ missing-kernel · XNNPACK runs "), titles
        assert titles[doc.line_of("class HalfSum")].startswith("ExecuTorch ✗ mismatch · XNNPACK runs 0 of 1 op; 1 line falls back"), titles
        assert titles[doc.line_of("class NoOutVariant")] == "ExecuTorch ✗ error · XNNPACK runs 1 of 2 ops; 1 line falls back", titles


async def test_a_program_its_dims_make_too_big_to_run_keeps_its_export_and_says_so_at_the_dims(tmp_path: Path) -> None:
    """pytorch/examples' super-resolution net, declared in ``upscale/targets.py`` with
    batch up to 32 and 1024 pixels a side: the editor shows it exported, and at the
    ``batch`` Dim what its ExecuTorch program needs -- never an out-of-memory."""
    shutil.copytree(FIXTURES / "memory" / "upscale", tmp_path / "upscale")
    (tmp_path / "pyproject.toml").write_text("")
    async with running_server("visual-studio-code", tmp_path, {"lower": ["executorch"], "cache": False, "timeout": 900}) as (client, _):
        doc = Doc(client, tmp_path / "upscale" / "targets.py")
        doc.open()
        found = await client.diagnostics_for(doc.uri, 1)
        assert ("lowering/executorch-memory", doc.line_of('batch = Dim("batch"')) in codes(found), codes(found)
        assert not [c for c, _ in codes(found) if c in ("out-of-memory", "worker-crash", "lowering/executorch-error")], codes(found)
        [warning] = [d for d in found if d.code == "lowering/executorch-memory"]
        assert warning.severity == types.DiagnosticSeverity.Warning
        assert "needs at least 9.1 GB to run, more than this job's memory cap of 8192 MB" in warning.message, warning.message
        assert "at `batch` up to 32, `height` up to 1024, `width` up to 1024" in warning.message, warning.message
        related = [(r.location.range.start.line, r.message) for r in warning.related_information or []]
        assert related == [(doc.line_of('height = Dim("height"'), "`height` is declared here"), (doc.line_of('width = Dim("width"'), "`width` is declared here")], related

        lenses = await client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(doc.uri)))
        titles = [lens.command.title for lens in lenses or [] if lens.command is not None]
        assert any(t.startswith("✓ upscaler exported") for t in titles), titles
        [executorch] = [t for t in titles if t.startswith("ExecuTorch")]
        assert "planned memory 1.1 GB, XNNPACK workspace at least 8.0 GB" in executorch and executorch.endswith("not run (needs 9.1 GB)"), executorch
        text = await _hover(client, doc, doc.line_of("def upscaler"))
        assert "not run: it needs at least 9.1 GB to run" in text, text
