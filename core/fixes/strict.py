"""Any error of a target declared ``strict=True``: export it with ``strict=False``.

Strict export traces ``forward`` with TorchDynamo, which refuses Python it cannot put
in a graph (``random.uniform`` in a LayerDrop, some builtins, side effects); non-strict
export runs ``forward`` as Python and traces only the tensor operations, and torch made
it the default for that reason. The fix changes the declaration: the module global
``strict = True`` becomes ``strict = False``, or the decorator's ``strict=True`` keyword
(``@exportlens.target(..., strict=True)``) becomes ``strict=False``.

Offered for every error of such a target; ``core/fixes/verified`` exports the edited file and
compares the program's outputs with the model's, so it is offered only where
non-strict export succeeds, and preferred only where the outputs are the same.
Checked with torch 2.13 on a LayerDrop that calls ``random.uniform``: strict export
fails ("Dynamo attempts to add additional input"), non-strict exports.
"""

from __future__ import annotations

import ast

from exportlens.core.fixes import nodes
from exportlens.core.fixes.model import Fix, replace_node
from exportlens.core.model.results import Diagnostic


def _strict_keyword(call: ast.Call) -> ast.Constant | None:
    for k in call.keywords:
        if k.arg == "strict" and isinstance(k.value, ast.Constant) and k.value.value is True:
            return k.value
    return None


def _declared_name(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call) -> str:
    for k in call.keywords:
        if k.arg == "name" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str):
            return k.value.value
    return node.name


def declaration(tree: ast.Module, target: str | None) -> ast.Constant | None:
    """The ``True`` of the target's ``strict`` declaration."""
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and _declared_name(node, deco) == target:
                    found = _strict_keyword(deco)
                    if found is not None:
                        return found
    # The module globals form: one target per file, its name the model's class name.
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "strict"
            and isinstance(node.value, ast.Constant)
            and node.value.value is True
        ):
            return node.value
    return None


def fixes(source: str, diagnostic: Diagnostic) -> list[Fix]:
    if diagnostic.severity != "error" or diagnostic.target is None:
        return []
    tree = nodes.parse(source)
    if tree is None:
        return []
    true = declaration(tree, diagnostic.target)
    if true is None:
        return []
    title = f"export `{diagnostic.target}` with `strict=False` (line {true.lineno}): non-strict export runs `forward` as Python"
    return [Fix(title, diagnostic, (replace_node(true, "False"),), preferred=True)]
