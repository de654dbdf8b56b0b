"""What decoding may resolve or hand to code generation: operator names and names.

Decoding is a trust boundary. Rebuilding a runnable program means turning operator
names into callables (``getattr`` on ``torch.ops``), and handing names to fx, which
pastes them into the Python source it generates and runs (``def forward(self, x)``,
``f(x, dim = -1)``, ``getattr(self, "0")``). Both are validated here *before* that
happens: only ops that resolve to real torch operators or a short allow-list of
builtins (resolved ops are cached), and only names that are identifiers or dotted
paths of them. Symbolic expressions have their own grammar:
:mod:`exportlens.core.serde.expressions`.
"""

from __future__ import annotations

import keyword
import math
import operator
import re
import unicodedata
from typing import Any

import torch

from exportlens.core.serde.codec import SchemaError
from exportlens.core.torchcompat import HigherOrderOperator, OpOverload, OpOverloadPacket

__all__ = ["check_target", "check_name", "check_path", "resolve_target"]

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
        ok = isinstance(resolved, (OpOverload, OpOverloadPacket, HigherOrderOperator))
    elif target.startswith("_operator."):
        ok = target[len("_operator.") :] in _OPERATOR_OK and hasattr(operator, target[10:])
    elif target.startswith("math."):
        ok = target[5:] in _MATH_OK
    elif target.startswith("torch."):
        ok = target[6:] in _SYM_NAMES
    if not ok:
        raise SchemaError(f"operator {target!r} is not a torch op or an allowed callable")


def check_name(name: str, what: str) -> str:
    """A name fx pastes into generated Python source as it is: a node or placeholder
    name (``def forward(self, x)``), a keyword argument (``f(x, dim = -1)``), a forward
    argument name. It must be an identifier and not a keyword; NFKC-normalized, so two
    names cannot become one when Python reads the source."""
    if not name.isidentifier() or keyword.iskeyword(name) or unicodedata.normalize("NFKC", name) != name:
        raise SchemaError(f"{what} {name[:80]!r} is not a Python identifier")
    return name


_PATH_PART = re.compile(r"[\w@-]+")


def check_path(path: str, what: str, *, root_ok: bool = False) -> str:
    """A dotted attribute path (``layers.0.weight``, a call graph's ``encoder.layer@1``).

    fx writes ``self.layers`` for a part that is an identifier and
    ``getattr(self.layers, "0")`` for one that is not, inside double quotes: so a part
    is an identifier that is not a keyword, or word characters, ``@`` and ``-`` only
    (no quote, backslash or line break to leave the string with). ``root_ok``: the
    empty path, the root module of a call graph or module stack.
    """
    if path == "" and root_ok:
        return path
    if len(path) > 1024:
        raise SchemaError(f"{what} {path[:80]!r}... is too long")
    for part in path.split("."):
        ok = (not keyword.iskeyword(part) and unicodedata.normalize("NFKC", part) == part) if part.isidentifier() else _PATH_PART.fullmatch(part) is not None
        if not ok:
            raise SchemaError(f"{what} {path[:80]!r} is not a dotted path of identifiers")
    return path


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
