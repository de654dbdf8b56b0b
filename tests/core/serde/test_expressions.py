"""The restricted expression grammar: what torch's symbolic shapes write is read back
exactly; code and expressions that would never finish are refused before sympy computes."""

from __future__ import annotations

from typing import Any

import pytest
import sympy
from torch.utils._sympy import functions as F
from torch.utils._sympy.numbers import int_oo

from exportlens.core.serde.codec import SchemaError
from exportlens.core.serde.expressions import parse_expr

from .mutate import HOSTILE_EXPRESSIONS

s0 = sympy.Symbol("s0", integer=True, positive=True)
s1 = sympy.Symbol("s1", integer=True, positive=True)
u0 = sympy.Symbol("u0", integer=True)
zuf0 = sympy.Symbol("zuf0", real=True)

TORCH_FORMS: list[Any] = [
    s0, u0, zuf0, s0 + 1, s0 - 3, -s0, 4 * s0 + 4 * s1, s0**2, 1 / s0, sympy.sqrt(s0),
    sympy.Rational(1, 3), sympy.Integer(2**63), sympy.Integer(-(2**63)), sympy.Float(0.5),
    sympy.Float(1e300), sympy.Float(5e-324), int_oo, -int_oo, sympy.oo, -sympy.oo, sympy.true, sympy.false,
    sympy.Eq(s0, 2), sympy.Ne(s0, 2), s0 < 5, s0 <= 5, u0 > 0, u0 >= 0, sympy.And(s0 > 2, s0 < 5), sympy.Not(sympy.Eq(s0, 3)),
    F.FloorDiv(s0, 2), F.CleanDiv(4 * s0, 2), F.CeilDiv(s0, 3), F.Mod(s0, 3), F.PythonMod(s0, 3),
    F.ModularIndexing(s0, 2, 4), F.Max(s0, 3), F.Min(s0, s1), F.Where(s0 > 2, s0, 3),
    F.CeilToInt(s0 * sympy.Float(0.5)), F.FloorToInt(zuf0), F.TruncToInt(zuf0), F.RoundToInt(zuf0),
    F.ToFloat(s0), F.FloatTrueDiv(F.ToFloat(s0), sympy.Float(2.0)), F.IntTrueDiv(s0, s1), F.Identity(s0),
    F.IsNonOverlappingAndDenseIndicator(s0, s1, 1, s0), F.PowByNatural(s0, 3), F.FloatPow(zuf0, sympy.Float(2.5)),
    F.LShift(s0, 3), F.RShift(s0, 1), F.OpaqueUnaryFn_sqrt(zuf0), F.BitwiseFn_bitwise_and(s0, s1),
]  # fmt: skip


@pytest.mark.parametrize("expr", TORCH_FORMS, ids=lambda e: sympy.srepr(e)[:50])
def test_what_torch_writes_reads_back_exactly(expr: Any) -> None:
    text = sympy.srepr(expr)
    assert parse_expr(text) == expr
    assert sympy.srepr(parse_expr(text)) == text


REFUSED = [
    *HOSTILE_EXPRESSIONS,
    "__import__('os').system('true')", "s0.__class__", "open('x')", "Symbol('s0').__class__", "Lambda(x, x)",
    "Function('open')('x')", "Integer(1)(2)", "[1]", "Add(*[Integer(1)])", "Integer(n=1)", "Integer(True)",
    "Symbol('__import__')", "Symbol('s0', integer='yes')", "Symbol('s0', evaluate=True)",
    "Symbol('s0', positive=True, negative=True)", "FloorDiv(Integer(1), Integer(0))", "Rational(Integer(1), 0)",
    "Pow(Integer(2), Symbol('s0', integer=True))", "LShift(Integer(1), Symbol('s0', integer=True))",
    "PowByNatural(Symbol('s0'), Integer(65))", "Pow(Integer(2), Float('1e30', precision=53))",
    "Float('nan', precision=53)", "Float('0.1', precision=100000000)", "Float('1e401', precision=53)",
    "Add(" * 3000 + ")" * 3000, "(" * 300 + ")" * 300, "Symbol('s\u0663', integer=True)", "x" * 5000, "",
]  # fmt: skip


@pytest.mark.adversarial
@pytest.mark.parametrize("text", REFUSED, ids=lambda t: t[:40])
def test_code_and_runaway_expressions_are_refused(text: str) -> None:
    with pytest.raises(SchemaError, match="symbolic expression"):
        parse_expr(text)
