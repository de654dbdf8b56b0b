"""``banned-mutation/parameter``: an in-place change of a parameter that requires grad
(``self.w.add_(1)``) -> the same statement under ``with torch.no_grad():``, torch's
own advice.

Checked with torch 2.13: the edited model exports, and the program then mutates the
parameter (a ``PARAMETER_MUTATION`` output, reported as ``mutation/parameter``, a
warning), which is what the statement asked for. In eager mode an in-place change of a
leaf that requires grad raises unless grad is off, so wherever the statement ran it
does the same thing under ``no_grad``. Not preferred: making the tensor a buffer is the
other way out, and only the user knows which it is.

Offered only for a statement of its own: the first on its line and followed by no
other statement there (``a; b``), not already under ``no_grad``, in a file that
imports ``torch`` under that name.
"""

from __future__ import annotations

import ast

from exportlens.core.fixes import nodes
from exportlens.core.fixes.model import Fix, insert_at, segment
from exportlens.core.model.results import Diagnostic


def _imports_torch(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Import) and any(a.name == "torch" and a.asname is None for a in n.names) for n in tree.body)


def _under_no_grad(parents: list[ast.AST]) -> bool:
    return any(isinstance(p, (ast.With, ast.AsyncWith)) and any("no_grad" in ast.dump(i.context_expr) for i in p.items) for p in parents)


def _alone_on_its_lines(stmt: ast.stmt, parent: ast.AST, lines: list[str]) -> bool:
    text = lines[stmt.lineno - 1]
    indent = len(text) - len(text.lstrip())
    if stmt.col_offset != indent:  # bytes == characters: the indentation is ASCII
        return False
    siblings = [s for field in ("body", "orelse", "finalbody") for s in getattr(parent, field, []) if isinstance(s, ast.stmt)]
    return not any(s is not stmt and s.lineno in (stmt.lineno, stmt.end_lineno) for s in siblings)


def fixes(source: str, diagnostic: Diagnostic) -> list[Fix]:
    tree = nodes.parse(source)
    found = nodes.statement_at(tree, diagnostic) if tree is not None else None
    if tree is None or found is None or not _imports_torch(tree):
        return []
    stmt, parents = found
    lines = source.split("\n")
    if not isinstance(stmt, ast.Expr) or not parents or _under_no_grad(parents) or not _alone_on_its_lines(stmt, parents[-1], lines):
        return []
    indent = lines[stmt.lineno - 1][: stmt.col_offset]
    # Continuation lines of a multi-line statement are inside brackets: their
    # indentation does not matter to Python, so one insertion is the whole edit.
    edit = insert_at(stmt.lineno, stmt.col_offset + 1, f"with torch.no_grad():\n{indent}    ")
    title = f"run `{segment(lines, stmt).splitlines()[0]}` under `torch.no_grad()` (the program then mutates the parameter)"
    return [Fix(title, diagnostic, (edit,))]
