"""The text report's pure parts: signature tables aligned in terminal cells (wide
CJK and accented names), terminal widths, and colour decided by NO_COLOR/FORCE_COLOR."""

from __future__ import annotations

import io

import pytest

from exportlens.core.model.signature import ArgSpec, InputSpec, OutputSpec, Signature, SourceLine, TensorMeta
from exportlens.report import signature_table
from exportlens.terminal import ljust, wants_colour, width


def _tensor(name: str) -> ArgSpec:
    return ArgSpec("tensor", name, meta=TensorMeta("float32", (3,), "cpu"))


def test_signature_columns_line_up_with_wide_and_accented_names() -> None:
    sig = Signature(
        inputs=(
            InputSpec("BUFFER", _tensor("b_步数"), target="步数", persistent=True, source=SourceLine(7)),
            InputSpec("USER_INPUT", _tensor("cafe\u0301"), source=SourceLine(9)),  # é as e + a combining accent
            InputSpec("USER_INPUT", _tensor("x"), source=SourceLine(9)),
        ),
        outputs=(OutputSpec("USER_OUTPUT", _tensor("out"), source=SourceLine(11)),),
    )
    rows = signature_table(sig)
    # Every row's last column (":line") starts at the same terminal cell.
    starts = {width(row[: row.rindex(":")]) for row in rows}
    assert len(starts) == 1, rows


def test_widths_count_terminal_cells() -> None:
    assert width("步数") == 4 and width("cafe\u0301") == 4 and width("café") == 4 and width("abc") == 3
    assert ljust("步", 4) == "步  "


@pytest.mark.parametrize(
    ("env", "tty", "expected"),
    [({}, True, True), ({}, False, False), ({"NO_COLOR": "1"}, True, False), ({"FORCE_COLOR": "1"}, False, True), ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, False, False), ({"NO_COLOR": ""}, True, True), ({"TERM": "dumb"}, True, False)],
)
def test_colour_follows_the_conventions(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], tty: bool, expected: bool) -> None:
    for key in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return tty

    assert wants_colour(Stream()) is expected


def test_signature_table_names_dims_after_the_users_dim_with_torchs_symbol_in_a_legend() -> None:
    x = ArgSpec("tensor", "x", meta=TensorMeta("float32", ("s77", "2*s77 + 1", "s3"), "cpu"))
    sig = Signature(
        inputs=(InputSpec("USER_INPUT", x, source=SourceLine(9)),),
        outputs=(OutputSpec("USER_OUTPUT", _tensor("out")),),
        ranges={"s77": (2, 64), "s3": (2, None)},
        dim_names={"s77": "batch"},  # s3: a Dim.AUTO dim, which has no name
    )
    rows = signature_table(sig)
    assert "float32[batch, 2*batch + 1, s3] cpu" in rows[0]
    assert rows[-2:] == ["  ranges: batch in [2, 64], s3 in [2, inf]", "  dims: batch is torch's s77"]
    unnamed = signature_table(Signature(sig.inputs, sig.outputs, sig.ranges))
    assert "float32[s77, 2*s77 + 1, s3] cpu" in unnamed[0] and unnamed[-1] == "  ranges: s77 in [2, 64], s3 in [2, inf]"
