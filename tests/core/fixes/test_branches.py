"""``data-dependent`` at an ``if`` on a tensor's value: the ``if`` rewritten as
``torch.where`` (preferred) and ``torch.cond``; the exact edit, and where neither is
offered. The diagnostic is the one a real export reports (the ``if`` line, from the
``if`` keyword); tests/e2e/test_fix_families_export.py exports each rewrite again."""

from __future__ import annotations

import textwrap

from exportlens.core.fixes import branches
from exportlens.core.fixes.model import apply
from exportlens.core.model.results import Diagnostic

GATE = textwrap.dedent(
    """\
    import torch
    from torch import nn

    class Gate(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x * 2
            else:
                return x - 1

    model = Gate()
    example_args = (torch.randn(3, 4),)
    """
)
MESSAGE = (
    "`if x.sum() > 0:` depends on the value of a tensor, not its shape: export cannot decide `Eq(u0, 1)`. Tell export what holds "
    "with `torch._check(...)` (or `torch._check_is_size`), or use `torch.cond` to keep both branches."
)


def _at_if(source: str, header: str = "if x.sum() > 0:", occurrence: int = 0) -> Diagnostic:
    """The diagnostic as export reports it: the header line, without its indentation."""
    lines = source.split("\n")
    found = [i for i, text in enumerate(lines) if text.strip().startswith(header)][occurrence]
    text = lines[found]
    column = len(text) - len(text.lstrip()) + 1
    return Diagnostic("data-dependent", MESSAGE, found + 1, column, found + 1, len(text.rstrip().encode()) + 1, "Gate")


def _fixed(source: str, d: Diagnostic | None = None) -> list[tuple[str, bool, str]]:
    return [(f.title, f.preferred, apply(source, f.edits)) for f in branches.fixes(source, d or _at_if(source))]


def test_two_returns_become_torch_where_preferred_and_torch_cond() -> None:
    d = _at_if(GATE)
    assert (d.line, d.column, d.end_line, d.end_column) == (6, 9, 6, 24)  # as the real export reports it
    [(where_title, where_preferred, where), (cond_title, cond_preferred, cond)] = _fixed(GATE, d)
    branch = "        if x.sum() > 0:\n            return x * 2\n        else:\n            return x - 1\n"
    assert where == GATE.replace(branch, "        return torch.where(x.sum() > 0, x * 2, x - 1)\n")
    assert where_title == "rewrite the `if` as `torch.where(x.sum() > 0, x * 2, x - 1)`" and where_preferred
    assert cond == GATE.replace(branch, "        return torch.cond(x.sum() > 0, lambda: x * 2, lambda: x - 1)\n")
    assert cond_title.startswith("rewrite the `if` as `torch.cond(x.sum() > 0, lambda: x * 2, lambda: x - 1)`") and not cond_preferred


def test_the_return_after_the_if_is_its_else() -> None:
    source = GATE.replace("            return x * 2\n        else:\n            return x - 1\n", "            return x * 2\n        return x - 1\n")
    [(_, preferred, where), (_, _, cond)] = _fixed(source)
    assert where == source.replace("if x.sum() > 0:\n            return x * 2\n        return x - 1", "return torch.where(x.sum() > 0, x * 2, x - 1)")
    assert preferred
    assert "        return torch.cond(x.sum() > 0, lambda: x * 2, lambda: x - 1)\n\nmodel" in cond


def test_one_name_assigned_in_both_branches_is_assigned_once() -> None:
    source = GATE.replace(
        "            return x * 2\n        else:\n            return x - 1\n",
        "            y = x.sin()\n        else:\n            y = x.cos()\n        return y + 1\n",
    )
    [(title, preferred, where), (_, _, cond)] = _fixed(source)
    assert "        y = torch.where(x.sum() > 0, x.sin(), x.cos())\n        return y + 1\n" in where
    assert preferred and "torch.where(x.sum() > 0, x.sin(), x.cos())" in title
    assert "        y = torch.cond(x.sum() > 0, lambda: x.sin(), lambda: x.cos())\n        return y + 1\n" in cond


def test_a_branch_that_returns_a_name_or_a_constant_gets_torch_where_only() -> None:
    """``torch.cond`` fails on a branch that returns an input unchanged (aliasing, torch
    2.13) and returns tensors only."""
    for a, b in (("x", "x - 1"), ("x * 2", "0.0"), ("self.w", "x")):
        source = GATE.replace("return x * 2", f"return {a}").replace("return x - 1", f"return {b}")
        [(title, preferred, text)] = _fixed(source)
        assert preferred and f"return torch.where(x.sum() > 0, {a}, {b})" in text, (a, b)
        assert title.startswith("rewrite the `if` as `torch.where(")


def test_a_call_as_the_test_and_a_multi_line_branch() -> None:
    source = GATE.replace("if x.sum() > 0:", "if (x > 0).any():").replace("return x * 2", "return torch.cat(\n                [x, x], 0\n            )[:3]")
    [(title, _, where)] = _fixed(source, _at_if(source, "if (x > 0).any():"))  # a subscript may be a view: no torch.cond
    assert "        return torch.where((x > 0).any(), torch.cat(\n                [x, x], 0\n            )[:3], x - 1)\n" in where
    assert title == "rewrite the `if` as `torch.where((x > 0).any(), torch.cat( [x, x], 0 )[:3], x - 1)`"


def test_no_branch_fix_where_the_if_is_not_one_value_each_way() -> None:
    body = "            return x * 2\n        else:\n            return x - 1\n"
    cases = {
        "a statement beside the return": GATE.replace(body, "            x = x + 1\n            return x * 2\n        else:\n            return x - 1\n"),
        "two names assigned": GATE.replace(body, "            y = x\n        else:\n            z = x\n        return x\n"),
        "no else, no return after": GATE.replace(body, "            x = x * 2\n        return x\n"),
        "an elif": GATE.replace(body, "            return x * 2\n        elif x.sum() < -1:\n            return x\n        else:\n            return x - 1\n"),
        "a tuple returned": GATE.replace("return x * 2", "return x, x").replace("return x - 1", "return x, -x"),
        "None returned": GATE.replace("return x * 2", "return None"),
        "both constants": GATE.replace("return x * 2", "return 1").replace("return x - 1", "return 0"),
        "torch imported as th": GATE.replace("import torch\n", "import torch as th\n"),
        "torch not imported": GATE.replace("import torch\n", "").replace("torch.randn(3, 4)", "None"),
    }
    for why, source in cases.items():
        assert _fixed(source) == [], why


def test_no_branch_fix_where_the_test_is_not_a_tensor() -> None:
    tests = ("x.sum().item() > 0", "bool(x.sum() > 0)", "x.sum() > 0 and x.mean() > 0", "0 < x.sum() < 9", "x is None", "not x.any()", "len(x.nonzero()) > 1")
    for test in tests:
        source = GATE.replace("if x.sum() > 0:", f"if {test}:")
        assert _fixed(source, _at_if(source, f"if {test}:")) == [], test


def test_no_branch_fix_at_the_elif_or_elsewhere() -> None:
    source = GATE.replace("        else:\n            return x - 1\n", "        elif x.sum() > 0:\n            return x * 3\n        else:\n            return x - 1\n")
    lines = source.split("\n")
    at = next(i for i, t in enumerate(lines) if t.strip().startswith("elif"))
    d = Diagnostic("data-dependent", MESSAGE, at + 1, 9, at + 1, len(lines[at]) + 1)
    assert branches.fixes(source, d) == []
    # A range that starts at no ``if``: the return in it.
    d = Diagnostic("data-dependent", MESSAGE, 7, 13, 7, 25)
    assert branches.fixes(GATE, d) == []
    assert branches.fixes(GATE + "\ndef (:\n", _at_if(GATE)) == []  # does not parse
