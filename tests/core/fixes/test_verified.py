"""The verification loop (``core/fixes/verified``) with a stand-in for the jobs: what
it asks a job to try, and what it offers from the verdicts. (The jobs themselves are
``core/export/verify``'s, exercised through the real CLI and server in
tests/e2e/test_fix_corpus.py and tests/server/test_e2e_verified_fixes.py.)"""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

from exportlens.core.fixes.model import apply
from exportlens.core.fixes.verified import MAX_ROUNDS, verify
from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import Diagnostic, FileResult, Verdict

SOURCE = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class Hops(nn.Module):
        def forward(self, x, hops):
            a = hops[0].item()
            b = hops[1].item()
            return x[::a] + x[::b]
    """
)


def _guard(symbol: str, name: str, line: int = 9) -> Diagnostic:
    return Diagnostic(
        "data-dependent",
        f"export cannot decide `{symbol} <= 0`",
        line,
        9,
        line,
        34,
        "Hops",
        facts=(("expr", f"{symbol} <= 0"), ("result", "False"), (f"name:{symbol}", name)),
    )


def _request(tmp_path: Path) -> ExportRequest:
    path = tmp_path / "hops.py"
    path.write_text(SOURCE)
    return ExportRequest(id=1, path=str(path), source=SOURCE)


def _ids() -> itertools.count[int]:
    return itertools.count(100)


def test_a_second_guard_found_by_the_fixed_export_is_chained(tmp_path: Path) -> None:
    request = _request(tmp_path)
    asked: list[list[str]] = []

    def run(r: ExportRequest) -> FileResult:
        texts = [dict(t.texts)[str(tmp_path / "hops.py")] for t in r.trials]
        asked.append(texts)
        verdicts = []
        for trial, text in zip(r.trials, texts, strict=True):
            if "torch._check(b > 0)" in text:
                verdicts.append(Verdict(trial.id, "kept"))
            else:  # the first check alone: the export stops at the second guard, one line lower
                verdicts.append(Verdict(trial.id, "failed", "data-dependent", (_guard("u1", "b", line=10),)))
        return FileResult(r.path, verdicts=tuple(verdicts))

    ids = _ids()
    [offered] = verify(request, FileResult(request.path, diagnostics=(_guard("u0", "a"),)), run, lambda p: None, deadline_s=60, next_id=lambda: next(ids))
    assert len(asked) == 2  # one job per round, not one per save
    assert offered.status == "kept" and offered.fix.preferred
    assert offered.fix.title == "add `torch._check(a > 0)` before line 9 (it held on the example inputs); then add `torch._check(b > 0)` before line 10 (it held on the example inputs)"
    fixed = apply(SOURCE, [e.__class__(**{**e.__dict__, "path": None}) for e in offered.fix.edits])
    assert "        torch._check(a > 0)\n        torch._check(b > 0)\n        return x[::a] + x[::b]\n" in fixed


def test_two_guards_of_one_target_are_tried_together_and_offered_each(tmp_path: Path) -> None:
    request = _request(tmp_path)

    def run(r: ExportRequest) -> FileResult:
        verdicts = []
        for trial in r.trials:
            text = dict(trial.texts)[str(tmp_path / "hops.py")]
            both = "torch._check(a > 0)" in text and "torch._check(b > 0)" in text
            verdicts.append(Verdict(trial.id, "kept") if both else Verdict(trial.id, "failed", "another guard"))
        return FileResult(r.path, verdicts=tuple(verdicts))

    ids = _ids()
    result = FileResult(request.path, diagnostics=(_guard("u0", "a"), _guard("u1", "b")))
    offered = verify(request, result, run, lambda p: None, deadline_s=60, next_id=lambda: next(ids))
    assert sorted(o.fix.title.split("`")[1] for o in offered) == ["torch._check(a > 0)", "torch._check(b > 0)"]
    assert all(o.fix.preferred and len(o.fix.edits) == 1 for o in offered)  # each its own edit


def test_a_fix_that_changes_the_outputs_is_not_preferred_and_says_so(tmp_path: Path) -> None:
    request = _request(tmp_path)
    ids = _ids()

    def run(r: ExportRequest) -> FileResult:
        return FileResult(r.path, verdicts=tuple(Verdict(t.id, "changed", "output 0 differs from the model's by up to 1") for t in r.trials))

    [offered] = verify(request, FileResult(request.path, diagnostics=(_guard("u0", "a"),)), run, lambda p: None, deadline_s=60, next_id=lambda: next(ids))
    assert not offered.fix.preferred and offered.fix.title.endswith("(changes the outputs: output 0 differs from the model's by up to 1)")


def test_the_loop_is_bounded_and_failed_fixes_are_not_offered(tmp_path: Path) -> None:
    request = _request(tmp_path)
    rounds = []

    def run(r: ExportRequest) -> FileResult:
        rounds.append(r)
        line = 9 + len(rounds)
        # Every fixed export stops at yet another guard (a name of its own each time).
        return FileResult(r.path, verdicts=tuple(Verdict(t.id, "failed", "again", (_guard(f"u{line}", "a", line=line),)) for t in r.trials))

    ids = _ids()
    assert verify(request, FileResult(request.path, diagnostics=(_guard("u0", "a"),)), run, lambda p: None, deadline_s=60, next_id=lambda: next(ids)) == []
    assert len(rounds) <= MAX_ROUNDS
