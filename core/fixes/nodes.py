"""Finding the user's code a diagnostic points at, in the file's syntax tree.

Diagnostics carry the range of a node or of a whole statement (1-based lines,
1-based UTF-8 byte columns, as ``ast`` counts them), so a node is found by its
exact start. Torch-free.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from exportlens.core.model.results import Diagnostic


def parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None  # the buffer does not parse: no fix can be shown to be right


def starts_at(node: ast.AST, d: Diagnostic) -> bool:
    return getattr(node, "lineno", None) == d.line and getattr(node, "col_offset", -1) + 1 == d.column


def spans(node: ast.AST, d: Diagnostic) -> bool:
    """``node`` covers exactly the diagnostic's range."""
    return (
        starts_at(node, d)
        and getattr(node, "end_lineno", None) == d.end_line
        and getattr(node, "end_col_offset", -1) + 1 == d.end_column
    )


def walk_with_parents(tree: ast.AST) -> Iterator[tuple[ast.AST, list[ast.AST]]]:
    """Every node with its ancestors, outermost first."""
    stack: list[tuple[ast.AST, list[ast.AST]]] = [(tree, [])]
    while stack:
        node, parents = stack.pop()
        yield node, parents
        for child in ast.iter_child_nodes(node):
            stack.append((child, [*parents, node]))


def statement_at(tree: ast.AST, d: Diagnostic) -> tuple[ast.stmt, list[ast.AST]] | None:
    """The statement the diagnostic's range is exactly, with its ancestors."""
    for node, parents in walk_with_parents(tree):
        if isinstance(node, ast.stmt) and spans(node, d):
            return node, parents
    return None


def enclosing_function(parents: list[ast.AST]) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for node in reversed(parents):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


def self_attribute(node: ast.AST, self_name: str) -> str | None:
    """``attr`` when ``node`` is ``<self_name>.attr``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == self_name:
        return node.attr
    return None
