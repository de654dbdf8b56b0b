"""The exported program run once on the example inputs (issue 22, point 8), in
process with real torch: a program that exports but does not run is an
``eager-error`` at the line of the failing node; the run is skipped, and says why,
with fake weights, over the size bound, or over the time bound."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from exportlens.core.export import program_run
from exportlens.core.export.targets import Built, Candidate
from exportlens.core.model.results import TargetDecl
from exportlens.core.model.signature import SourceLine
from exportlens.core.source.project import Sources
from exportlens.core.source.sourcemap import SourceIndex

MODEL = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class M(nn.Module):
        def __init__(self, mixed: bool) -> None:
            super().__init__()
            self.a = nn.Linear(8, 8)
            self.b = nn.Linear(8, 4).double() if mixed else nn.Linear(8, 4)

        def forward(self, x):
            y = self.a(x)
            return self.b(y)
    """
)


def _setup(tmp_path: Path, mixed: bool) -> tuple[Any, Built, Candidate, Sources]:
    path = tmp_path / f"m_{mixed}.py"
    path.write_text(MODEL)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    built = Built(module.M(mixed), (torch.randn(2, 8),), None, None, False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(built.module, built.args, strict=False).run_decompositions({})
    index = SourceIndex.build(MODEL, str(path))
    candidate = Candidate(TargetDecl("M", 5, "globals"), SourceLine(5), lambda: built)
    return ep, built, candidate, Sources(index, str(tmp_path))


def test_a_program_that_exports_but_does_not_run_is_an_error_at_the_failing_nodes_line(tmp_path: Path) -> None:
    ep, built, candidate, sources = _setup(tmp_path, mixed=True)
    run, [d] = program_run.check(ep, built, candidate, sources)
    assert run.status == "failed" and "mat1 and mat2 must have the same dtype" in run.reason
    assert (d.code, d.severity, d.line) == ("eager-error", "error", MODEL.splitlines().index("        return self.b(y)") + 1)
    assert "fails when run on the example inputs" in d.message and "While executing" not in d.message


def test_a_program_that_runs_is_ok(tmp_path: Path) -> None:
    ep, built, candidate, sources = _setup(tmp_path, mixed=False)
    run, found = program_run.check(ep, built, candidate, sources)
    assert (run.status, found) == ("ok", [])


def test_never_with_fake_weights(tmp_path: Path) -> None:
    ep, built, candidate, sources = _setup(tmp_path, mixed=True)
    built.weights = "fake"
    run, found = program_run.check(ep, built, candidate, sources)
    assert (run.status, found) == ("skipped", []) and "fake weights" in run.reason


@pytest.mark.parametrize(("bound", "value", "reason"), [("MAX_BYTES", 100, "a check run may take"), ("MAX_SECONDS", 0.0, "ran longer than")])
def test_skipped_over_its_bounds_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bound: str, value: float, reason: str) -> None:
    ep, built, candidate, sources = _setup(tmp_path, mixed=True)
    monkeypatch.setattr(program_run, bound, value)
    run, found = program_run.check(ep, built, candidate, sources)
    assert (run.status, found) == ("skipped", []) and reason in run.reason
