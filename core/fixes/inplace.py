"""``banned-mutation/input-metadata``: an in-place shape/stride change of an input
(``x.transpose_(0, 1)``) -> the out-of-place op, rebinding the name
(``x = x.transpose(0, 1)``), which is what torch's message advises.

Offered only for the plain form, where the rewrite is exactly equivalent inside
``forward``: an expression statement ``name.op_(...)`` whose result is unused, on a
parameter of the enclosing function that no other name aliases there. What changes is
only that the caller's tensor is no longer changed, which export cannot do anyway.
Checked with torch 2.13: the rewritten model exports without the diagnostic.
"""

from __future__ import annotations

import ast

from exportlens.core.fixes import nodes
from exportlens.core.fixes.model import Fix, TextEdit, replace_node, segment
from exportlens.core.model.results import Diagnostic

# The metadata-mutating in-place ops whose out-of-place twin takes the same arguments.
OUT_OF_PLACE = {
    "transpose_": "transpose",
    "t_": "t",
    "squeeze_": "squeeze",
    "unsqueeze_": "unsqueeze",
    "swapdims_": "swapdims",
    "swapaxes_": "swapaxes",
    "as_strided_": "as_strided",
}


def _aliased(function: ast.AST, name: str, before: ast.stmt) -> bool:
    """Whether ``name`` is handed on before ``before`` runs: assigned to another name,
    put in a container, or passed to a call as a bare name. Then the in-place op
    changes what that alias sees, and a rebinding would not."""
    start = (before.lineno, before.col_offset)
    for node in ast.walk(function):
        if (getattr(node, "end_lineno", 0), getattr(node, "end_col_offset", 0)) > start:
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and isinstance(node.value, ast.Name) and node.value.id == name:
            return True
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and isinstance(node.ctx if not isinstance(node, ast.Set) else ast.Load(), ast.Load):
            if any(isinstance(v, ast.Name) and v.id == name for v in node.elts):
                return True
        if isinstance(node, ast.Dict) and any(isinstance(v, ast.Name) and v.id == name for v in node.values):
            return True
        if isinstance(node, ast.Call) and any(isinstance(a, ast.Name) and a.id == name for a in [*node.args, *(k.value for k in node.keywords)]):
            return True
    return False


def fixes(source: str, diagnostic: Diagnostic) -> list[Fix]:
    tree = nodes.parse(source)
    found = nodes.statement_at(tree, diagnostic) if tree is not None else None
    if found is None:
        return []
    stmt, parents = found
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return []
    call = stmt.value
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr in OUT_OF_PLACE):
        return []
    name = func.value.id
    function = nodes.enclosing_function(parents)
    if function is None or name not in {a.arg for a in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)}:
        return []
    if any(isinstance(p, (ast.For, ast.AsyncFor, ast.While)) for p in parents[parents.index(function) :]):
        return []  # a second iteration would see the rebinding where it saw the mutation: equivalent, but not provably so for every loop
    if _aliased(function, name, stmt):
        return []
    lines = source.split("\n")
    arguments = segment(lines, call)[len(segment(lines, func)) :]  # "(0, 1)" as the user wrote it
    new = f"{name} = {name}.{OUT_OF_PLACE[func.attr]}{arguments}"
    edit: TextEdit = replace_node(stmt, new)
    return [Fix(f"use the out-of-place `{new}`", diagnostic, (edit,), preferred=True)]
