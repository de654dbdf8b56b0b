"""``data-dependent`` at an ``if`` whose test is the value of a tensor (``if x.sum() >
0:``): export cannot pick a branch, so the ``if`` becomes one expression that keeps
both.

Offered when the diagnostic's range starts at the ``if`` keyword of an ``if``
statement (not an ``elif``; the range is the header line) and the two branches are
one value each, with no other statement:

* ``return A`` / ``else: return B``, or ``return A`` with the ``return B`` right after
  the ``if`` (the code the example did not branch to);
* ``y = A`` / ``else: y = B``, the same one name assigned once in each branch.

Two rewrites, each replacing the whole ``if`` (and the ``return B`` after it):

* ``torch.where(<test>, A, B)`` (``return torch.where(...)``, ``y = torch.where(...)``):
  elementwise the same as the ``if`` when ``A`` and ``B`` have one shape and dtype (the
  test is a one-element tensor, or eager's ``if`` would fail). Preferred: the
  verifier re-exports the edited file and compares its outputs with eager's, and
  drops it where they differ (shapes that broadcast to a larger one, two dtypes
  promoted to one).
* ``torch.cond(<test>, lambda: A, lambda: B)``: both branches kept as subgraphs, the
  one taken chosen at run time. Checked with torch 2.13: ``cond`` takes closures
  (functions of no argument reading the enclosing locals, ``self`` and its
  submodules), and branches whose shapes differ; its ``operands`` must be tensors only
  (an ``int`` local among them fails), which is why the closure form is used. It
  fails when a branch returns an input or a local unchanged (aliasing), so it is
  offered only when neither branch is a bare name, attribute or subscript, nor a
  constant (``cond``'s branches return tensors). Never preferred: ``torch.where``,
  when it holds, leaves a plainer graph.

Only when the test is a tensor expression: one comparison (``<``, ``>``, ``<=``,
``>=``, ``==``, ``!=``) or a call (``x.any()``, ``torch.all(m)``), with no ``.item()``,
``.tolist()``, ``bool``/``int``/``float``/``len`` in it (a Python value is no
``torch.where`` condition), and when the file imports ``torch`` as ``torch``. A fix that
drops a branch (keeping the one the example took) would change what the model
computes for other inputs: none is made. Checked with torch 2.13 by exporting the
edited model (``torch.where`` and ``torch.cond`` forms, return and assignment
shapes) and comparing its outputs with eager's.
"""

from __future__ import annotations

import ast

from exportlens.core.fixes import nodes
from exportlens.core.fixes.model import Fix, TextEdit, segment
from exportlens.core.model.results import Diagnostic

_COMPARISONS = (ast.Lt, ast.Gt, ast.LtE, ast.GtE, ast.Eq, ast.NotEq)
_TO_PYTHON = {"item", "tolist"}  # methods that give a Python value, not a tensor
_BUILTINS = {"bool", "int", "float", "len", "isinstance", "hasattr", "callable", "any", "all"}
# Values neither rewrite can hold: no tensor, or no expression a lambda may return.
_NOT_A_VALUE = (ast.Tuple, ast.List, ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda, ast.Starred, ast.JoinedStr)
_NOT_IN_A_LAMBDA = (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr)


def _imports_torch(tree: ast.Module) -> bool:
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                bound = alias.asname or alias.name.split(".")[0]
                if bound == "torch" and (alias.asname is None or alias.name == "torch"):
                    return True
    return False


def _tensor_test(test: ast.expr) -> bool:
    """A comparison or a call that gives a tensor, with nothing in it that gives Python."""
    if isinstance(test, ast.Compare):
        if len(test.ops) != 1 or not isinstance(test.ops[0], _COMPARISONS):
            return False
    elif not isinstance(test, ast.Call):
        return False
    for node in ast.walk(test):
        if isinstance(node, _NOT_IN_A_LAMBDA):
            return False
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _TO_PYTHON:
                return False
            if isinstance(func, ast.Name) and func.id in _BUILTINS:
                return False
    return True


def _value(expr: ast.expr | None) -> bool:
    if expr is None or isinstance(expr, _NOT_A_VALUE):
        return False
    if isinstance(expr, ast.Constant) and not isinstance(expr.value, (int, float)):
        return False  # None, a string: no tensor
    return not any(isinstance(n, _NOT_IN_A_LAMBDA) for n in ast.walk(expr))


def _assigned(stmts: list[ast.stmt]) -> tuple[str, ast.expr] | None:
    """``(name, value)`` when ``stmts`` is exactly ``name = value``."""
    stmt = stmts[0] if len(stmts) == 1 else None
    if not isinstance(stmt, ast.Assign):
        return None
    if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
        return None
    return stmt.targets[0].id, stmt.value


def _returned(stmts: list[ast.stmt]) -> ast.expr | None:
    if len(stmts) == 1 and isinstance(stmts[0], ast.Return):
        return stmts[0].value
    return None


def _following(tree: ast.AST, node: ast.stmt) -> ast.stmt | None:
    """The statement right after ``node`` in its block."""
    for parent in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and any(s is node for s in block):
                at = next(i for i, s in enumerate(block) if s is node)
                return block[at + 1] if at + 1 < len(block) else None
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def fixes(source: str, diagnostic: Diagnostic) -> list[Fix]:
    tree = nodes.parse(source)
    if tree is None or not _imports_torch(tree):
        return []
    lines = source.split("\n")
    found = next((n for n in ast.walk(tree) if isinstance(n, ast.If) and nodes.starts_at(n, diagnostic)), None)
    if found is None or diagnostic.end_line not in (None, found.lineno):
        return []
    head = lines[found.lineno - 1].encode("utf-8")[found.col_offset :]
    if not head.startswith(b"if") or head[2:3].isalnum():
        return []  # an ``elif``: its ``if`` is the one before it
    if not _tensor_test(found.test):
        return []
    end: ast.stmt = found
    true_return, false_return = _returned(found.body), _returned(found.orelse)
    if true_return is not None and not found.orelse:
        after = _following(tree, found)
        false_return = _returned([after]) if after is not None else None
        end = after if after is not None else found
    true_assign, false_assign = _assigned(found.body), _assigned(found.orelse)
    if true_return is not None and false_return is not None:
        lead, a, b = "return ", true_return, false_return
    elif true_assign is not None and false_assign is not None and true_assign[0] == false_assign[0]:
        lead, a, b = f"{true_assign[0]} = ", true_assign[1], false_assign[1]
    else:
        return []
    if not (_value(a) and _value(b)) or (isinstance(a, ast.Constant) and isinstance(b, ast.Constant)):
        return []
    test, yes, no = (segment(lines, n) for n in (found.test, a, b))

    def rewrite(expr: str) -> TextEdit:
        last = end.end_lineno or end.lineno
        return TextEdit(found.lineno, found.col_offset + 1, last, (end.end_col_offset or 0) + 1, f"{lead}{expr}")

    where = f"torch.where({test}, {yes}, {no})"
    out = [Fix(f"rewrite the `if` as `{_one_line(where)}`", diagnostic, (rewrite(where),), preferred=True)]
    aliases = (ast.Name, ast.Attribute, ast.Subscript, ast.Constant)
    if not isinstance(a, aliases) and not isinstance(b, aliases):
        cond = f"torch.cond({test}, lambda: {yes}, lambda: {no})"
        title = f"rewrite the `if` as `{_one_line(cond)}` (export keeps both branches)"
        out.append(Fix(title, diagnostic, (rewrite(cond),)))
    return out
