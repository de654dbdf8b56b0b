"""The packed-sequence fix on real source text: the three statements it rewrites, and
where it offers nothing. The diagnostic is at the layer's call, as the export
reports it (tests/e2e/test_fix_corpus.py exports the edited models)."""

from __future__ import annotations

from pathlib import Path

from exportlens.core.fixes import apply, fixes_for
from exportlens.core.model.results import Diagnostic, FileResult

TAGGER = (Path(__file__).resolve().parents[2] / "corpus" / "fixes" / "packed_tagger.py").read_text()
MESSAGE = "zeros(): argument 'size' failed to unpack the object at pos 2 with error \"type must be tuple of ints,but got FakeTensor\""


def _at(source: str, statement: str) -> Diagnostic:
    lines = source.split("\n")
    i = next(n for n, line in enumerate(lines) if statement in line)
    column = lines[i].index(statement) + 1
    return Diagnostic("export-error", MESSAGE, i + 1, column, i + 1, column + len(statement), "Tagger")


def test_the_layer_runs_on_the_padded_batch_and_the_padding_is_zeroed() -> None:
    [fix] = fixes_for(TAGGER, _at(TAGGER, "y, _ = self.lstm(packed)"), FileResult("packed_tagger.py"))
    assert fix.preferred and "instead of packing" in fix.title
    fixed = apply(TAGGER, fix.edits)
    assert "pack_padded_sequence(x" not in fixed and "pad_packed_sequence(y" not in fixed
    assert "        y, _ = self.lstm(x)\n        y = y * (torch.arange(y.shape[1], device=y.device)[None, :] < lengths[:, None]).unsqueeze(-1).to(y.dtype)\n" in fixed


def test_time_major_masks_the_other_axis() -> None:
    source = TAGGER.replace("batch_first=True", "batch_first=False")
    [fix] = fixes_for(source, _at(source, "y, _ = self.lstm(packed)"), FileResult("packed_tagger.py"))
    assert "(torch.arange(y.shape[0], device=y.device)[:, None] < lengths[None, :])" in apply(source, fix.edits)


def test_nothing_where_the_shape_is_another() -> None:
    # The packed value used twice, and the lengths of the padded output kept.
    for source in (
        TAGGER.replace("y, _ = self.lstm(packed)", "y, _ = self.lstm(packed)\n        print(packed)"),
        TAGGER.replace("y, _ = pad_packed_sequence(", "y, sizes = pad_packed_sequence("),
        TAGGER.replace("y, _ = pad_packed_sequence(y, batch_first=True", "y, _ = pad_packed_sequence(y, batch_first=False"),
    ):
        assert fixes_for(source, _at(source, "y, _ = self.lstm(packed)"), FileResult("packed_tagger.py")) == []
