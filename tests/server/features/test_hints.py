"""Inlay hints built from real export results (``features/hints.HintIndex``): where a
hint goes, what it says when several targets run a line, and that a result whose
programs cannot be read gives no hints instead of an error."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from exportlens.core.model.results import FileResult
from exportlens.server.features.hints import HintIndex
from exportlens.server.markup import MARKDOWN

SOURCE = '''\
import torch
from torch import nn
from torch.export import Dim

import exportlens


class Split(nn.Module):
    def forward(self, x):
        a, b = x.chunk(2, dim=-1)  # two values: the last one assigned
        for _ in range(2):
            a = a + b
        if x.shape[0] > 0:
            a = a * 2
        return a


@exportlens.target(dynamic_shapes={"x": {0: Dim("rows", max=64)}})
def small():
    return Split(), (torch.randn(3, 4),)


@exportlens.target()
def wide():
    return Split(), (torch.randn(3, 8),)
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FileResult]:
    from exportlens.core.pipeline import Overrides, Pipeline

    path = tmp_path_factory.mktemp("hints") / "split.py"
    path.write_text(SOURCE)
    [result] = Pipeline(Overrides(timeout_s=120, cache=False)).run([str(path)], jobs=1).results
    assert [t.status for t in result.targets] == ["ok", "ok"], result.diagnostics
    return path, result


def line_of(text: str) -> int:
    return SOURCE[: SOURCE.index(text)].count("\n")


def test_each_line_shows_its_last_value_per_target(built: tuple[Path, FileResult]) -> None:
    path, result = built
    hints = {h.line: h for h in HintIndex.build(str(path), SOURCE, result, MARKDOWN).between(0, 100)}
    chunk = hints[line_of("a, b = x.chunk")]
    # Two targets, two shapes: each named; the Dim of one target named, the other static.
    assert chunk.label == "small: float32[rows, 2] · wide: float32[3, 4]"
    assert chunk.byte_column == len(SOURCE.split("\n")[line_of("a, b = x.chunk")].split("  #")[0].encode())
    assert hints[line_of("a = a + b")].label == "small: float32[rows, 2] · wide: float32[3, 4]"
    assert hints[line_of("a = a * 2")].label == "small: float32[rows, 2] · wide: float32[3, 4]"
    # Nothing computed on a loop's header or by returning a name: no hint.
    assert line_of("for _ in range(2):") not in hints and line_of("return a") not in hints
    assert "`rows` is torch's `s" in chunk.tooltip and "wide: `getitem_1`" in chunk.tooltip


def test_a_program_that_cannot_be_read_gives_no_hints(built: tuple[Path, FileResult]) -> None:
    path, result = built
    broken = replace(result, targets=tuple(replace(t, program=b"\x93garbage") for t in result.targets))
    assert len(HintIndex.build(str(path), SOURCE, broken, MARKDOWN)) == 0


def test_hints_of_another_file_are_not_here(built: tuple[Path, FileResult], tmp_path: Path) -> None:
    path, result = built
    other = tmp_path / "split.py"  # same name, another folder
    assert len(HintIndex.build(str(other), SOURCE, result, MARKDOWN)) == 0
    assert len(HintIndex.build(str(path), SOURCE, result, MARKDOWN)) > 0


SEMICOLONS = '''\
import torch
from torch import nn

import exportlens


class Two(nn.Module):
    def forward(self, x):
        a = x * 2; b = a.sum(-1, keepdim=True)  # two statements on one line
        return a + b


@exportlens.target()
def two():
    return Two(), (torch.randn(3, 4),)
'''


def test_a_line_of_two_statements_shows_its_hint_after_the_last(tmp_path: Path) -> None:
    from exportlens.core.pipeline import Overrides, Pipeline

    path = tmp_path / "two.py"
    path.write_text(SEMICOLONS)
    [result] = Pipeline(Overrides(timeout_s=120, cache=False)).run([str(path)], jobs=1).results
    assert [t.status for t in result.targets] == ["ok"], result.diagnostics
    line = SEMICOLONS.split("\n").index("        a = x * 2; b = a.sum(-1, keepdim=True)  # two statements on one line")
    [hint] = [h for h in HintIndex.build(str(path), SEMICOLONS, result, MARKDOWN).between(line, line)]
    # The last value the line assigns (b), after the line's code, not between the statements.
    assert hint.label == "float32[3, 1]"
    assert hint.byte_column == len("        a = x * 2; b = a.sum(-1, keepdim=True)")
