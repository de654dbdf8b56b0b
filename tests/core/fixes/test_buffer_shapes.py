"""The buffer fix against the shapes a real export recorded: preferred when the value
the line assigns broadcasts to the buffer's literal shape, not offered when it does
not (torch 2.13 would copy it into the buffer and fail), offered with a caveat when
the buffer's shape is not a literal."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import torch

import exportlens
from exportlens.core.fixes import fixes_for
from exportlens.core.fixes.shapes import broadcasts, literal_shape
from exportlens.core.model.results import Diagnostic, FileResult, TargetResult
from tests.core.fixes.test_fixes import ATTRIBUTE, ATTRIBUTE_MESSAGE, _diag


def _result(path: Path, source: str) -> tuple[FileResult, Diagnostic]:
    """The model in ``source`` exported for real; the diagnostic the export reports at its assignment."""
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"m_{abs(hash(str(path)))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(module.Cache(), (torch.randn(2, 4),))
    d = _diag(source, "banned-mutation/tensor-attribute", "self.last = y * 2", ATTRIBUTE_MESSAGE)
    d = Diagnostic(d.code, d.message, d.line, d.column, d.end_line, d.end_column, target="Cache")
    return FileResult(str(path), targets=(TargetResult("Cache", 1, "ok", program=exportlens.dumps(ep)),)), d


def test_the_buffer_fix_is_preferred_when_the_recorded_shape_fits(tmp_path: Path) -> None:
    result, d = _result(tmp_path / "fits.py", ATTRIBUTE)
    [fix] = fixes_for(ATTRIBUTE, d, result)
    assert fix.preferred and "shape [2, 4]" in fix.title


def test_no_buffer_fix_when_the_recorded_shape_does_not_fit(tmp_path: Path) -> None:
    source = ATTRIBUTE.replace("torch.zeros(2, 4)", "torch.zeros(3, 4)")
    result, d = _result(tmp_path / "other_shape.py", source)
    assert fixes_for(source, d, result) == []


def test_a_buffer_of_unknown_shape_gets_a_fix_that_says_what_it_needs(tmp_path: Path) -> None:
    source = ATTRIBUTE.replace("torch.zeros(2, 4)", "torch.zeros(2, 4) + 0")
    result, d = _result(tmp_path / "computed.py", source)
    [fix] = fixes_for(source, d, result)
    assert not fix.preferred and "same shape needed" in fix.title


def test_literal_shapes_and_broadcasting() -> None:
    import ast

    def shape(text: str) -> tuple[int, ...] | None:
        return literal_shape(ast.parse(text, mode="eval").body)

    assert shape("torch.zeros(2, 4)") == (2, 4)
    assert shape("torch.ones((2, 4), dtype=torch.int64)") == (2, 4)
    assert shape("torch.full([3], 0.5)") == (3,)
    assert shape("torch.zeros(n, 4)") is None and shape("torch.zeros(*size)") is None and shape("torch.tensor([1, 2])") is None
    assert broadcasts((4,), (2, 4)) and broadcasts((1, 4), (2, 4)) and broadcasts((2, 4), (2, 4))
    assert not broadcasts((3, 4), (2, 4)) and not broadcasts((2, 2, 4), (2, 4))


# Two targets running one class (a quick-fix fixture, also used end to end).
TWO_TARGETS = (Path(__file__).parents[2] / "fixtures" / "fixes" / "two_targets.py").read_text()


def test_the_buffer_fix_must_fit_every_target_that_runs_the_assignment(tmp_path: Path) -> None:
    from exportlens.core.pipeline import Overrides, Pipeline

    path = tmp_path / "two.py"
    path.write_text(TWO_TARGETS)
    [result] = Pipeline(Overrides(timeout_s=120, cache=False)).run([str(path)], jobs=1).results
    found = {d.target: d for d in result.diagnostics if d.code == "banned-mutation/tensor-attribute"}
    assert set(found) == {"narrow", "wide"}, result.diagnostics
    # narrow's value fits the [4] buffer, wide's [8] does not: registering the buffer
    # would make wide fail to export, so neither diagnostic gets the fix.
    assert fixes_for(TWO_TARGETS, found["narrow"], result) == []
    assert fixes_for(TWO_TARGETS, found["wide"], result) == []
    # Both targets of one shape: the fix fits both, and is preferred.
    same = TWO_TARGETS.replace("torch.randn(3, 8)", "torch.randn(5, 4)")
    path.write_text(same)
    [result] = Pipeline(Overrides(timeout_s=120, cache=False)).run([str(path)], jobs=1).results
    for d in result.diagnostics:
        [fix] = fixes_for(same, d, result)
        assert fix.preferred and "shape [4]" in fix.title
