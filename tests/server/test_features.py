"""Diagnostics mapping (core -> LSP), with no server process."""

from __future__ import annotations

from lsprotocol import types

from exportlens.core.model.results import Diagnostic, Related
from exportlens.server.features.diagnostics import SOURCE, docs_anchor, stable_id, to_lsp
from exportlens.server.positions import UTF8, UTF16, split_lines

TEXT = 'class M:\n    def forward(self, x):\n        s = "€€"; self.steps.add_(1)\n        return x\n'
LINES = split_lines(TEXT)


def test_a_diagnostic_maps_to_utf16_with_code_link_and_target() -> None:
    line = LINES[2]
    start = len(line[: line.index("self.steps")].encode()) + 1  # 1-based byte column
    end = len(line[: line.index(")") + 1].encode()) + 1
    d = Diagnostic("mutation/buffer", "mutates", 3, start, 3, end, target="M")
    lsp = to_lsp(d, LINES, "/m.py", UTF16)
    assert lsp.range.start == types.Position(2, line.index("self.steps"))  # '€' is 1 UTF-16 unit, 3 bytes
    assert lsp.range.end == types.Position(2, line.index(")") + 1)
    assert (lsp.code, lsp.source, lsp.severity) == ("mutation/buffer", SOURCE, types.DiagnosticSeverity.Information)
    assert lsp.code_description is not None and lsp.code_description.href == docs_anchor("mutation/buffer")
    assert docs_anchor("mutation/buffer").endswith("#mutation-buffer")
    # A stable id: target, code and span in core terms, the same in every position encoding.
    assert lsp.data == {"id": f"M|mutation/buffer|3:{start}-3:{end}", "target": "M"} and stable_id(d) == lsp.data["id"]
    utf8 = to_lsp(d, LINES, "/m.py", UTF8)
    assert utf8.range.start.character == start - 1 and utf8.data == lsp.data


def test_no_end_means_the_rest_of_the_line_and_column_one_skips_indentation() -> None:
    lsp = to_lsp(Diagnostic("timeout", "slow", 4), LINES, "/m.py", UTF16)
    assert lsp.range == types.Range(types.Position(3, 8), types.Position(3, len(LINES[3])))
    assert lsp.data == {"id": "|timeout|4:1-"}  # no target, no end: still an id
    assert lsp.severity == types.DiagnosticSeverity.Error


def test_out_of_range_lines_clamp_to_the_document() -> None:
    lsp = to_lsp(Diagnostic("import-error", "x", 99, 1), LINES, "/m.py", UTF16)
    assert lsp.range.start.line == len(LINES) - 1


def test_related_information_points_into_this_file_and_others() -> None:
    related = (Related("/m.py", 2, "defined here", 5), Related("/other.py", 1, "Dim declared here"))
    d = Diagnostic("constraint-violation", "violated", 3, 9, related=related)
    lsp = to_lsp(d, LINES, "/m.py", UTF16, read=lambda path: ["batch = Dim('batch')"])
    assert lsp.related_information is not None
    [own, other] = lsp.related_information
    assert own.location.uri == "file:///m.py" and own.location.range.start == types.Position(1, 4)
    assert own.message == "defined here"
    assert other.location.uri == "file:///other.py" and other.location.range.end.character == len("batch = Dim('batch')")
