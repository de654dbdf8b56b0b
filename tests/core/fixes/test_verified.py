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


def test_an_insertion_at_the_start_of_a_replaced_range_lands_before_it() -> None:
    from exportlens.core.fixes.model import TextEdit

    edits = [TextEdit(1, 1, 1, 1, "ZZ"), TextEdit(1, 1, 1, 4, "Q")]
    assert apply("abcdef", edits) == apply("abcdef", edits[::-1]) == "ZZQdef"


MODULE = "import torch\n\n\ndef helper(x, k):\n    n = k.item()\n    return x[::n]\n"


def test_a_chained_fix_in_a_module_round_one_never_read_edits_only_its_line(tmp_path: Path) -> None:
    request = _request(tmp_path)
    module = tmp_path / "helpers.py"
    module.write_text(MODULE)
    second = Diagnostic(
        "data-dependent", "export cannot decide `u1 <= 0`", 6, 5, 6, 19, "Hops", path=str(module),
        facts=(("expr", "u1 <= 0"), ("result", "False"), ("name:u1", "n")),
    )

    def run(r: ExportRequest) -> FileResult:
        verdicts = []
        for trial in r.trials:
            texts = dict(trial.texts)
            if "torch._check(n > 0)" in texts.get(str(module), ""):
                verdicts.append(Verdict(trial.id, "kept"))
            else:
                verdicts.append(Verdict(trial.id, "failed", "the helper's guard", (second,)))
        return FileResult(r.path, verdicts=tuple(verdicts))

    ids = _ids()
    [offered] = verify(request, FileResult(request.path, diagnostics=(_guard("u0", "a"),)), run, lambda p: Path(p).read_text() if Path(p).exists() else None, deadline_s=60, next_id=lambda: next(ids))
    by_file: dict[str | None, list] = {}
    for e in offered.fix.edits:
        by_file.setdefault(e.path, []).append(e.__class__(**{**e.__dict__, "path": None}))
    assert apply(MODULE, by_file[str(module)]) == "import torch\n\n\ndef helper(x, k):\n    n = k.item()\n    torch._check(n > 0)\n    return x[::n]\n"
    assert "torch._check(a > 0)" in apply(SOURCE, by_file[str(tmp_path / "hops.py")])


def test_a_together_trial_that_needs_one_more_fix_is_offered_as_one_fix(tmp_path: Path) -> None:
    request = _request(tmp_path)

    def run(r: ExportRequest) -> FileResult:
        verdicts = []
        for trial in r.trials:
            text = dict(trial.texts)[str(tmp_path / "hops.py")]
            checks = sum(f"torch._check({n} > 0)" in text for n in ("a", "b", "c"))
            if checks == 3:
                verdicts.append(Verdict(trial.id, "kept"))
            elif checks == 2:  # both first guards fixed: the export stops at a third
                third = _guard("u2", "c", line=11)
                verdicts.append(Verdict(trial.id, "failed", "a third guard", (third,)))
            else:
                verdicts.append(Verdict(trial.id, "failed", "another guard"))
        return FileResult(r.path, verdicts=tuple(verdicts))

    ids = _ids()
    result = FileResult(request.path, diagnostics=(_guard("u0", "a"), _guard("u1", "b")))
    source = SOURCE.replace("            return x[::a] + x[::b]\n", "            c = a + b\n            return x[::a] + x[::b] + x[::c]\n")
    request = ExportRequest(id=1, path=request.path, source=source)
    [offered] = verify(request, result, run, lambda p: None, deadline_s=60, next_id=lambda: next(ids))
    fixed = apply(source, [e.__class__(**{**e.__dict__, "path": None}) for e in offered.fix.edits])
    assert all(f"torch._check({n} > 0)" in fixed for n in ("a", "b", "c")), fixed
