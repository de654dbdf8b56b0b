"""Symbolic expressions from hostile bytes: ``srepr`` text -> sympy, by a restricted grammar.

Why not ``sympy.sympify``: it is an ``eval``, and even text that holds nothing but
arithmetic can make sympy compute for minutes or fill the memory (``2**64**64``,
``Pow(2, 10**39)``, ``Rational('1e99999999')``, ``Float('0.1', 10**8)``). So the text
is parsed with :mod:`ast` (which builds a tree and runs nothing), every node is checked
against an allow-list of the shapes ``sympy.srepr`` writes for the expressions torch's
symbolic shapes make, and only then are sympy objects built, leaves first.

What the grammar accepts:

- ``Symbol('s0', integer=True, positive=True)``: a torch-style name and known
  assumptions; ``Integer(n)``, ``Rational(p, q)`` with bounded parts;
  ``Float('0.5', precision=53)`` with bounded digits, exponent and precision; the
  constants ``oo``, ``-oo``, ``int_oo``, ``-int_oo``, ``zoo``, ``nan``, ``true``, ``false``.
- Calls of sympy's ``Add``/``Mul``/``Pow``/relations/``And``/``Or``/``Not`` and of the
  functions of ``torch.utils._sympy.functions`` (``FloorDiv``, ``Mod``, ``Max``...),
  each with its arity.

Sizes are bounded before sympy computes anything: the text, the nesting, the number of
calls, every exponent and shift (a literal number, at most 64), and two estimates kept
for every sub-expression: how many bits its value can have once symbols take their
hints (a symbol counts 64: hints and ranges are 64-bit ints in the bytes), and how many
terms its full expansion can have (torch's shape environment expands expressions).
"""

from __future__ import annotations

import ast
import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy

from exportlens.core.serde.codec import SchemaError
from exportlens.core.torchcompat import int_oo
from exportlens.core.torchcompat import sympy_functions as F

__all__ = ["parse_expr", "MAX_EXPR_CHARS", "SYMBOL_NAME"]

MAX_EXPR_CHARS = 4096
_MAX_DEPTH = 48  # nested calls
_MAX_CALLS = 1024
_MAX_ARGS = 64  # arguments of one call (Add, Mul, Max...)
_MAX_INT_BITS = 128  # Integer and Rational parts: about 38 digits
_MAX_EXPONENT = 64  # |exponent| of Pow-like calls, and shifts
_MAX_PRECISION = 256  # bits of a Float's mantissa (torch writes 53)
_MAX_FLOAT_DIGITS = 80
_MAX_FLOAT_EXP10 = 400  # doubles reach 1e308 and 5e-324
_MAX_BITS = 1 << 14  # of any value once hints are substituted
_MAX_TERMS = 4096  # of any sub-expression's full expansion
_SYMBOL_BITS = 64

SYMBOL_NAME = re.compile(r"[a-z]{1,4}[0-9]{1,9}")
_FLOAT_TEXT = re.compile(r"-?(?P<mantissa>\d+\.?\d*|\.\d+)(?:e(?P<exp>[+-]?\d{1,4}))?")
_ASSUMPTIONS = frozenset(
    {"integer", "real", "positive", "negative", "nonnegative", "nonpositive", "nonzero", "zero",
     "finite", "rational", "extended_real", "commutative"}
)  # fmt: skip
_CONSTANTS: dict[str, Any] = {
    "oo": sympy.oo, "int_oo": int_oo, "zoo": sympy.zoo, "nan": sympy.nan,
    "true": sympy.true, "false": sympy.false,
}  # fmt: skip
_NEGATED = {"oo": -sympy.oo, "int_oo": -int_oo}


@dataclass(frozen=True)
class _Call:
    fn: Callable[..., Any]
    min_args: int
    max_args: int
    size: str  # how the size estimates combine: "add", "mul", "pow", "shift" or "other"


def _calls() -> dict[str, _Call]:
    def c(fn: Callable[..., Any], lo: int, hi: int = -1, size: str = "other") -> _Call:
        return _Call(fn, lo, hi if hi >= 0 else lo, size)

    calls = {
        "Add": c(sympy.Add, 1, _MAX_ARGS, "add"),
        "Mul": c(sympy.Mul, 1, _MAX_ARGS, "mul"),
        "Pow": c(sympy.Pow, 2, size="pow"),
        "PowByNatural": c(F.PowByNatural, 2, size="pow"),
        "FloatPow": c(F.FloatPow, 2, size="pow"),
        "LShift": c(F.LShift, 2, size="shift"),
        "RShift": c(F.RShift, 2, size="shift"),
        "Max": c(F.Max, 1, _MAX_ARGS),
        "Min": c(F.Min, 1, _MAX_ARGS),
        "IsNonOverlappingAndDenseIndicator": c(F.IsNonOverlappingAndDenseIndicator, 2, _MAX_ARGS),
        "ModularIndexing": c(F.ModularIndexing, 3),
        "Where": c(F.Where, 3),
        "RoundDecimal": c(F.RoundDecimal, 2, size="shift"),
        "And": c(sympy.And, 1, _MAX_ARGS),
        "Or": c(sympy.Or, 1, _MAX_ARGS),
        "Not": c(sympy.Not, 1),
        "Abs": c(sympy.Abs, 1),
        "floor": c(sympy.floor, 1),
        "ceiling": c(sympy.ceiling, 1),
    }
    for name in ("FloorDiv", "PythonMod", "Mod", "CleanDiv", "CeilDiv", "IntTrueDiv", "FloatTrueDiv"):
        calls[name] = c(getattr(F, name), 2)
    for name in ("CeilToInt", "FloorToInt", "TruncToFloat", "TruncToInt", "RoundToInt", "ToFloat", "Identity"):
        calls[name] = c(getattr(F, name), 1)
    for cls in (sympy.Equality, sympy.Unequality, sympy.StrictLessThan, sympy.LessThan, sympy.StrictGreaterThan, sympy.GreaterThan):
        calls[cls.__name__] = c(cls, 2)
    # torch's opaque math and bitwise functions, as many as this torch has
    for name in dir(F):
        if name.startswith("OpaqueUnaryFn_"):
            calls[name] = c(getattr(F, name), 1)
        elif name.startswith("BitwiseFn_"):
            calls[name] = c(getattr(F, name), 2)
    return calls


_CALLS = _calls()


@dataclass(frozen=True)
class _Value:
    expr: Any  # a sympy object
    bits: int  # bound on the bits of its value once symbols take 64-bit hints
    terms: int  # bound on the number of terms of its full expansion


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.calls = 0

    def fail(self, why: str) -> SchemaError:
        return SchemaError(f"symbolic expression {self.text[:80]!r}: {why}")

    def build(self, node: ast.expr, depth: int) -> _Value:
        if depth > _MAX_DEPTH:
            raise self.fail(f"nested deeper than {_MAX_DEPTH} calls")
        if isinstance(node, ast.Name) and node.id in _CONSTANTS:
            return _Value(_CONSTANTS[node.id], 1, 1)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Name) and node.operand.id in _NEGATED:
            return _Value(_NEGATED[node.operand.id], 1, 1)
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise self.fail(f"{type(node).__name__} is not allowed")
        self.calls += 1
        if self.calls > _MAX_CALLS:
            raise self.fail(f"more than {_MAX_CALLS} calls")
        name = node.func.id
        if name == "Symbol":
            return self.symbol(node)
        if name == "Integer":
            self.no_keywords(node)
            n = self.int_literal(self.only_args(node, 1)[0])
            return _Value(sympy.Integer(n), max(n.bit_length(), 1), 1)
        if name == "Rational":
            self.no_keywords(node)
            p, q = (self.int_literal(a) for a in self.only_args(node, 2))
            if q == 0:
                raise self.fail("a rational with denominator 0")
            return _Value(sympy.Rational(p, q), max(p.bit_length(), q.bit_length(), 1), 1)
        if name == "Float":
            return self.float(node)
        call = _CALLS.get(name)
        if call is None:
            raise self.fail(f"{name!r} is not an allowed function")
        self.no_keywords(node)
        if not call.min_args <= len(node.args) <= call.max_args:
            raise self.fail(f"{name} takes {call.min_args}..{call.max_args} arguments, not {len(node.args)}")
        args = [self.build(a, depth + 1) for a in node.args]
        bits, terms = self.sizes(name, call.size, args)
        try:
            expr = call.fn(*(a.expr for a in args))
        except Exception as e:  # sympy and torch's functions raise all sorts on odd (but bounded) arguments
            raise self.fail(f"{name}: {_why(e)}") from None
        return _Value(expr, bits, terms)

    def sizes(self, name: str, rule: str, args: list[_Value]) -> tuple[int, int]:
        """The size estimates of a call, refused when over the bounds, before sympy computes it."""
        if rule == "add":
            bits, terms = max(a.bits for a in args) + len(args).bit_length(), sum(a.terms for a in args)
        elif rule == "mul":
            bits, terms = sum(a.bits for a in args), math.prod(min(a.terms, _MAX_TERMS + 1) for a in args)
        elif rule in ("pow", "shift"):
            base, exponent = args
            e = self.small_number(name, exponent)
            n = max(math.ceil(abs(e)), 1)
            if rule == "pow":
                bits, terms = base.bits * n, min(base.terms, _MAX_TERMS + 1) ** n
            else:
                bits, terms = base.bits + n, base.terms
        else:
            bits, terms = max(a.bits for a in args) + 1, sum(a.terms for a in args)
        if bits > _MAX_BITS:
            raise self.fail(f"{name} can reach values of {bits} bits (at most {_MAX_BITS})")
        if terms > _MAX_TERMS:
            raise self.fail(f"{name} can expand to more than {_MAX_TERMS} terms")
        return bits, terms

    def small_number(self, name: str, v: _Value) -> float:
        """An exponent, shift or rounding position: a literal number of magnitude <= 64."""
        expr = v.expr
        if not isinstance(expr, sympy.Number) or not expr.is_finite:
            raise self.fail(f"{name}: the exponent or shift must be a finite number, not {str(expr)[:40]!r}")
        e = float(expr)
        if not abs(e) <= _MAX_EXPONENT:
            raise self.fail(f"{name}: exponent or shift {str(expr)[:40]} is over {_MAX_EXPONENT}")
        return e

    # ---- leaves

    def only_args(self, node: ast.Call, n: int) -> list[ast.expr]:
        if len(node.args) != n:
            raise self.fail(f"{node.func.id} takes exactly {n} argument(s)")  # type: ignore[attr-defined]
        return node.args

    def no_keywords(self, node: ast.Call) -> None:
        if node.keywords:
            raise self.fail(f"{node.func.id} takes no keyword arguments")  # type: ignore[attr-defined]

    def int_literal(self, node: ast.expr) -> int:
        negative = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
        if negative:
            node = node.operand  # type: ignore[attr-defined]
        if not isinstance(node, ast.Constant) or type(node.value) is not int:
            raise self.fail("expected an integer literal")
        if node.value.bit_length() > _MAX_INT_BITS:
            raise self.fail(f"an integer of more than {_MAX_INT_BITS} bits")
        return -node.value if negative else node.value

    def symbol(self, node: ast.Call) -> _Value:
        (arg,) = self.only_args(node, 1)
        if not isinstance(arg, ast.Constant) or type(arg.value) is not str or not SYMBOL_NAME.fullmatch(arg.value):
            raise self.fail("a symbol's name must look like 's0', 'u3' or 'zuf1'")
        assumptions: dict[str, bool] = {}
        for kw in node.keywords:
            if kw.arg not in _ASSUMPTIONS or kw.arg in assumptions:
                raise self.fail(f"symbol assumption {kw.arg!r} is not allowed")
            if not isinstance(kw.value, ast.Constant) or type(kw.value.value) is not bool:
                raise self.fail(f"symbol assumption {kw.arg}= must be True or False")
            assumptions[kw.arg] = kw.value.value
        try:
            return _Value(sympy.Symbol(arg.value, **assumptions), _SYMBOL_BITS, 1)
        except Exception as e:  # contradictory assumptions (positive and negative)
            raise self.fail(f"symbol {arg.value}: {_why(e)}") from None

    def float(self, node: ast.Call) -> _Value:
        (arg,) = self.only_args(node, 1)
        text = arg.value if isinstance(arg, ast.Constant) and type(arg.value) is str else ""
        m = _FLOAT_TEXT.fullmatch(text)
        if m is None or len(m.group("mantissa")) > _MAX_FLOAT_DIGITS:
            raise self.fail("a float must be Float('<decimal text>', precision=<bits>)")
        exp10 = int(m.group("exp") or 0)
        if abs(exp10) > _MAX_FLOAT_EXP10:
            raise self.fail(f"a float with exponent {exp10}")
        if len(node.keywords) != 1 or node.keywords[0].arg != "precision":
            raise self.fail("a float must be Float('<decimal text>', precision=<bits>)")
        precision = self.int_literal(node.keywords[0].value)
        if not 1 <= precision <= _MAX_PRECISION:
            raise self.fail(f"a float with precision {precision} (at most {_MAX_PRECISION} bits)")
        digits = len(m.group("mantissa").split(".")[0].lstrip("0"))
        bits = precision + math.ceil((max(digits, 0) + max(exp10, 0)) * 3.33)
        return _Value(sympy.Float(text, precision=precision), bits, 1)


def _why(e: Exception) -> str:
    first = str(e).strip().split("\n", 1)[0]
    return f"{type(e).__name__}: {first[:100]}"


@functools.lru_cache(maxsize=4096)
def parse_expr(text: str) -> Any:
    """``sympy.srepr`` text -> the sympy expression, or :class:`SchemaError`.

    Expressions are immutable values, so one parse serves every load of a program.
    """
    if type(text) is not str or len(text) > MAX_EXPR_CHARS:
        raise SchemaError(f"symbolic expression too large: {str(text)[:80]!r}")
    if not text.isascii():
        raise SchemaError(f"symbolic expression {text[:80]!r}: not ASCII")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise SchemaError(f"symbolic expression {text[:80]!r}: {type(e).__name__}") from None
    try:
        return _Parser(text).build(tree.body, 0).expr
    except RecursionError:
        raise SchemaError(f"symbolic expression {text[:80]!r}: nested too deep") from None
