"""``data-dependent``: tell export what holds of a value read from a tensor.

Export traces with fake tensors; a value read out of one (``.item()``, ``.tolist()``,
the length of a ``nonzero()`` result) is an unbacked symbol (``u0``) with no value, and
a guard on it fails. Three fixes, each at the user's line that fails:

* **``int(t.item())`` as a size**: ``int()`` asks for the symbol's value, which export
  cannot give; ``t.item()`` of an integer tensor is already an int (a symbol export
  keeps). The fix drops the ``int(...)`` around an ``.item()`` call in the failing
  statement.
* **``len(t)``** of a tensor whose first size is unbacked: ``len()`` must return a
  plain int, ``t.shape[0]`` may be a symbol. The fix writes ``t.shape[0]``.
* **A guard on the symbol** (``u0 <= 0`` when slicing with a step read from a tensor):
  ``torch._check(...)`` of what held on the example inputs, before the failing
  statement, in the user's names. The job records the guard's expression, its value on
  the example inputs (``draft_export`` runs the real tensors beside the fake ones) and
  the local names that hold each symbol (``Diagnostic.facts``, from
  ``core/export/explain``); the guard is turned into Python with those names
  (``Eq(u0, 1)`` -> ``s == 1``), negated when it was false (``s > 0``). Offered only when
  every symbol of the guard has a name there and the guard is a comparison.

Several checks may be needed, one failure at a time: ``core/fixes/verified`` applies a fix,
exports again, and asks for the next fix of the new diagnostic, in one bounded loop.
Each fix is meant to keep what the model computes (preferred): a ``torch._check``
asserts what held on the example inputs, and the exported program checks it when it
runs. Checked with torch 2.13 on the three forms above: each edited model exports,
and its program's outputs equal the model's.
"""

from __future__ import annotations

import ast
import re

from exportlens.core.fixes import nodes
from exportlens.core.fixes.model import Fix, insert_at, replace_node, segment
from exportlens.core.model.results import Diagnostic

_BARE_SYMBOL = re.compile(r"^u\d+$")
_NEGATED = {ast.Lt: ">=", ast.LtE: ">", ast.Gt: "<=", ast.GtE: "<", ast.Eq: "!=", ast.NotEq: "=="}
_OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_ARITHMETIC = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}


def _imports_torch(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Import) and any(a.name == "torch" and a.asname is None for a in n.names) for n in tree.body)


def _term(node: ast.expr, names: dict[str, str]) -> str | None:
    """A sympy term in the user's Python, or None when a symbol has no name."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return str(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _term(node.operand, names)
        return f"-{inner}" if inner is not None else None
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _term(node.left, names), _term(node.right, names)
        if left is None or right is None:
            return None
        return f"({left} {_ARITHMETIC[type(node.op)]} {right})"
    return None


def check_expression(expr: str, result: bool, names: dict[str, str]) -> str | None:
    """``torch._check``'s argument for the guard ``expr`` (sympy's text) that was
    ``result`` on the example inputs, in the user's ``names`` for its symbols."""
    try:
        tree = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return None
    if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id in {"Eq", "Ne"} and len(tree.args) == 2:
        op: type[ast.cmpop] = ast.Eq if tree.func.id == "Eq" else ast.NotEq
        left, right = tree.args
    elif isinstance(tree, ast.Compare) and len(tree.ops) == 1 and type(tree.ops[0]) in _OPS:
        op, left, right = type(tree.ops[0]), tree.left, tree.comparators[0]
    else:
        return None
    a, b = _term(left, names), _term(right, names)
    if a is None or b is None:
        return None
    shown = (_OPS if result else _NEGATED)[op]
    return f"{a.removeprefix('(').removesuffix(')') if a.startswith('(') and a.endswith(')') else a} {shown} {b}"


def _names(d: Diagnostic) -> dict[str, str]:
    return {k.removeprefix("name:"): v for k, v in d.facts if k.startswith("name:")}


def _unwrap_int(source: str, stmt: ast.stmt, d: Diagnostic) -> list[Fix]:
    lines = source.split("\n")
    found = []
    for node in ast.walk(stmt):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" and len(node.args) == 1 and not node.keywords):
            continue
        inner = node.args[0]
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "item" and not inner.args:
            text = segment(lines, inner)
            found.append(Fix(f"use `{text}` as it is, without `int(...)`: export keeps the value symbolic", d, (replace_node(node, text),), preferred=True))
    return found


def _len_to_shape(source: str, stmt: ast.stmt, d: Diagnostic) -> list[Fix]:
    lines = source.split("\n")
    found = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1 and not node.keywords:
            arg = node.args[0]
            if isinstance(arg, (ast.Name, ast.Attribute)):
                text = f"{segment(lines, arg)}.shape[0]"
                found.append(Fix(f"use `{text}` instead of `len(...)`: export keeps a tensor's size symbolic", d, (replace_node(node, text),), preferred=True))
    return found


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def fixes(source: str, diagnostic: Diagnostic) -> list[Fix]:
    tree = nodes.parse(source)
    if tree is None:
        return []
    found = nodes.statement_at(tree, diagnostic)
    if found is None:
        # A compound statement's range is its header line only (``if ...:``).
        found = next(
            ((n, p) for n, p in nodes.walk_with_parents(tree) if isinstance(n, ast.stmt) and nodes.starts_at(n, diagnostic)),
            None,
        )
    if found is None:
        return []
    stmt, parents = found
    expr = diagnostic.fact("expr")
    out: list[Fix] = []
    if expr is not None and _BARE_SYMBOL.match(expr):
        # Export needed the value itself (``int()``, ``len()``): keep it symbolic.
        out += _unwrap_int(source, stmt, diagnostic) + _len_to_shape(source, stmt, diagnostic)
    result = diagnostic.fact("result")
    if expr is None or result not in {"True", "False"} or not _imports_torch(tree):
        return out
    check = check_expression(expr, result == "True", _names(diagnostic))
    if check is None or nodes.enclosing_function(parents) is None:
        return out
    names = set(_names(diagnostic).values())
    if isinstance(stmt, (ast.If, ast.While)) and any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(stmt.test)):
        # A branch on the value itself: asserting the way it went on the example
        # drops the other way from the program (``branches`` rewrites it instead).
        return out
    if isinstance(stmt, (ast.If, ast.While)) and not isinstance(parents[-1], ast.Module):
        owner = parents[-1]
        if isinstance(owner, ast.If) and stmt in owner.orelse and len(owner.orelse) == 1:
            return out  # an ``elif``: no statement can go before it
    line = source.split("\n")[stmt.lineno - 1]
    text = f"{_indent(line)}torch._check({check})\n"
    # Pinning the value (``n == 4``) makes the program accept that one value only:
    # offered, never preferred; a bound (``s > 0``) is what the op needs anyway.
    pins = " == " in check
    title = f"add `torch._check({check})` before line {stmt.lineno} (it held on the example inputs" + ("; the program then accepts this value only)" if pins else ")")
    out.append(Fix(title, diagnostic, (insert_at(stmt.lineno, 1, text),), preferred=not pins))
    return out
