"""What decoding may resolve or evaluate: operator names and symbolic expressions.

Decoding is a trust boundary. Rebuilding a runnable program means turning operator
names into callables (``getattr`` on ``torch.ops``) and expression text into sympy
objects (``sympy.sympify``, an ``eval``). Both are validated here *before* that
happens: only ops that resolve to real torch operators or a short allow-list of
builtins, and only arithmetic on symbols and numbers. Resolved ops are cached.
"""

from __future__ import annotations

import math
import operator
import re
from typing import Any

import torch

from exportlens.core.serde.codec import SchemaError

__all__ = ["check_target", "check_expr", "resolve_target"]

_OPS_RE = re.compile(r"torch\.ops\.[A-Za-z_]\w*\.[A-Za-z_]\w*(\.[A-Za-z_]\w*)?")
_OPERATOR_OK = {
    "getitem", "add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "neg", "pos", "abs",
    "eq", "ne", "lt", "le", "gt", "ge", "and_", "or_", "xor", "not_", "invert", "lshift", "rshift",
}  # fmt: skip
_MATH_OK = {"ceil", "floor", "trunc", "sqrt", "log", "exp", "sin", "cos", "tan", "fabs"}
_SYM_NAMES = {
    "sym_int", "sym_float", "sym_max", "sym_min", "sym_not", "sym_ite", "sym_sqrt", "sym_sum",
    "sym_fresh_size", "_sym_sqrt", "sym_and", "sym_or",
}  # fmt: skip


def check_target(target: str) -> None:
    """Refuse an operator name that is not a torch op or an allow-listed callable."""
    ok = False
    if _OPS_RE.fullmatch(target):
        resolved: Any = torch.ops
        for part in target.split(".")[2:]:
            resolved = getattr(resolved, part, None)
        ok = isinstance(resolved, (torch._ops.OpOverload, torch._ops.OpOverloadPacket, torch._ops.HigherOrderOperator))
    elif target.startswith("_operator."):
        ok = target[len("_operator.") :] in _OPERATOR_OK and hasattr(operator, target[10:])
    elif target.startswith("math."):
        ok = target[5:] in _MATH_OK
    elif target.startswith("torch."):
        ok = target[6:] in _SYM_NAMES
    if not ok:
        raise SchemaError(f"operator {target!r} is not a torch op or an allowed callable")


_EXPR_TOKEN = re.compile(r"\s*(?:(?P<str>'[\w.+-]{0,64}')|(?P<num>\d+(?:\.\d+)?(?:e[+-]?\d+)?)|(?P<name>[A-Za-z_]\w*)|(?P<op>\*\*|[-+*/%(),<>=!]=?|[&|~]))")
_SYMBOL_RE = re.compile(r"[a-z]{1,4}\d+")
_EXPR_NAMES = {
    "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "And", "Or", "Not", "Max", "Min", "Abs", "Mod", "floor",
    "ceiling", "sqrt", "oo", "zoo", "nan", "int_oo", "True", "False", "Integer", "Rational",
    "Float", "Piecewise", "Pow", "Mul", "Add", "Symbol", "I", "pi", "E",
    "FloorDiv", "ModularIndexing", "Where", "PythonMod", "CleanDiv", "CeilToInt", "FloorToInt",
    "CeilDiv", "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv", "IntTrueDiv",
    "IsNonOverlappingAndDenseIndicator", "TruncToFloat", "TruncToInt", "RoundToInt",
    "RoundDecimal", "ToFloat", "Identity", "StrictLessThan", "LessThan", "GreaterThan",
    "StrictGreaterThan", "Equality", "Unequality", "BooleanTrue", "BooleanFalse", "true", "false",
    "Infinity", "NegativeInfinity", "IntInfinity", "NegativeIntInfinity", "positive", "negative",
    "integer", "real", "nonnegative", "nonpositive", "finite", "commutative", "precision", "zero",
}  # fmt: skip


def check_expr(expr: str) -> None:
    """Only arithmetic on symbols and numbers may reach ``sympy.sympify`` (an ``eval``)."""
    if len(expr) > 4096 or expr.count("**") > 2:
        raise SchemaError(f"symbolic expression too large: {expr[:80]!r}")
    pos, prev_pow = 0, False
    while pos < len(expr):
        m = _EXPR_TOKEN.match(expr, pos)
        if m is None:
            if expr[pos:].strip() == "":
                break
            raise SchemaError(f"symbolic expression {expr[:80]!r}: unexpected {expr[pos:pos + 10]!r}")
        num, name = m.group("num"), m.group("name")
        if num is not None and (len(num) > 40 or (prev_pow and float(num) > 64)):
            raise SchemaError(f"symbolic expression {expr[:80]!r}: number {num[:20]!r} too large")
        if name is not None and name not in _EXPR_NAMES and not _SYMBOL_RE.fullmatch(name):
            raise SchemaError(f"symbolic expression {expr[:80]!r}: name {name!r} is not allowed")
        prev_pow = m.group("op") == "**"
        pos = m.end()


_RESOLVED: dict[str, Any] = {}


def resolve_target(target: str) -> Any:
    """The callable an operator name stands for, after :func:`check_target`."""
    fn = _RESOLVED.get(target)
    if fn is not None:
        return fn
    check_target(target)
    if target.startswith("torch.ops."):
        fn = torch.ops
        for part in target.split(".")[2:]:
            fn = getattr(fn, part)
    elif target.startswith("_operator."):
        fn = getattr(operator, target[len("_operator.") :])
    elif target.startswith("math."):
        fn = getattr(math, target[len("math.") :])
    else:
        fn = getattr(torch, target[len("torch.") :])
    _RESOLVED[target] = fn
    return fn
