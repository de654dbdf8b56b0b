"""``training-mode``: a model exported in training mode -> ``.eval()`` where it is declared.

The diagnostic stands at the target's declaration. The fix appends ``.eval()`` to the
expression that makes the module (``nn.Module.eval`` returns the module itself, so
the value stays the model):

- the module-globals form, ``model = Generator()`` -> ``model = Generator().eval()``;
- a factory (``@exportlens.target`` on a function, a ``pyproject.toml`` entry) whose
  one ``return`` gives a tuple ``(module, args[, kwargs])`` or a dict with ``"model"``:
  the module's expression there.

An expression that is not an atom (``a if b else c``) is put in parentheses first. Not
offered for a decorated class (exportlens constructs it: no expression of the user's
makes the module), nor for a factory with several ``return``s. Preferred: the program
takes the same inputs, and eval mode is what a deployed model runs. Checked with torch
2.13 by exporting the edited file again: the warning is gone, and batch norm's
running-statistics updates (its ``BUFFER_MUTATION`` outputs) with it.
"""

from __future__ import annotations

import ast

from exportlens.core.fixes import nodes
from exportlens.core.fixes.model import Fix, TextEdit, insert_at, segment
from exportlens.core.model.results import Diagnostic

_ATOMS = (ast.Call, ast.Name, ast.Attribute, ast.Subscript)


def _module_expression(statement: ast.stmt) -> ast.expr | None:
    """The expression that makes the module, in a declaration statement."""
    if isinstance(statement, (ast.Assign, ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id == "model":
            return statement.value
        return None
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
        returns = [n for n in _own_nodes(statement.body) if isinstance(n, ast.Return)]
        if len(returns) != 1 or returns[0].value is None:
            return None
        value = returns[0].value
        if isinstance(value, ast.Tuple) and value.elts and not isinstance(value.elts[0], ast.Starred):
            return value.elts[0]
        if isinstance(value, ast.Dict):
            for key, item in zip(value.keys, value.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "model":
                    return item
    return None


def _own_nodes(body: list[ast.stmt]) -> list[ast.AST]:
    """The nodes of ``body``, not looking into nested functions or classes."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _already_eval(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("eval", "train")


def fixes(source: str, diagnostic: Diagnostic) -> list[Fix]:
    tree = nodes.parse(source)
    if tree is None:
        return []
    statement = next((s for s in tree.body if diagnostic.line in (s.lineno, *(d.lineno for d in getattr(s, "decorator_list", ())))), None)
    expr = _module_expression(statement) if statement is not None else None
    if expr is None or _already_eval(expr):
        return []
    lines = source.split("\n")
    text = segment(lines, expr)
    end = insert_at(expr.end_lineno or expr.lineno, (expr.end_col_offset or 0) + 1, ".eval()")
    edits: tuple[TextEdit, ...]
    if isinstance(expr, _ATOMS):
        edits = (end,)
    else:
        edits = (insert_at(expr.lineno, expr.col_offset + 1, "("), insert_at(end.line, end.column, ").eval()"))
    shown = text.splitlines()[0] + (" ..." if "\n" in text else "")
    return [Fix(f"put the model in eval mode: `{shown}.eval()`", diagnostic, edits, preferred=True)]
