"""``unsupported-type`` for a Hugging Face model that returns its key/value cache
(``DynamicCache``) -> ``use_cache=False`` where the model's config is made.

The diagnostic stands at the target's declaration (the factory's ``def``, or the
``model = ...`` line), because the cache is returned from transformers' code. The
config is made in the target's own code: the factory's body, or the file's top-level
statements for the globals form. The fix adds ``use_cache=False`` to the one call
that makes it: a ``...Config(...)`` constructor, else a ``.from_pretrained(...)`` (which
passes config attributes on). Offered only when that call is unambiguous: exactly one
such call, no ``**kwargs`` in it, and ``use_cache`` written nowhere in that code (the
user already decides it somewhere). Checked with torch 2.13 and transformers 5.23
(GPT-2 from a config, and from a saved folder with ``from_pretrained``): the edited
target exports.
"""

from __future__ import annotations

import ast
import re

from exportlens.core.fixes import nodes
from exportlens.core.fixes.model import Fix, TextEdit
from exportlens.core.model.results import Diagnostic, FileResult

_RETURNS_CACHE = re.compile(r"^the model returns its key/value cache \(`\w+`\)")


def _scope(tree: ast.Module, line: int) -> list[ast.stmt] | None:
    """The statements of the target declared at ``line``: the function defined there
    (its body), or the module's top level when the line is a top-level statement."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == line:
            return list(node.body)
    if any(n.lineno <= line <= (n.end_lineno or n.lineno) and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in tree.body):
        return [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return None


def _calls(statements: list[ast.stmt]) -> list[ast.Call]:
    """The calls of ``statements``, not looking into nested functions or classes
    (their code runs elsewhere, maybe never)."""
    out: list[ast.Call] = []
    stack: list[ast.AST] = list(statements)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call):
            out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _add_keyword(call: ast.Call, keyword: str) -> TextEdit:
    """Insert ``keyword`` as the call's last argument: right after the last argument
    (a trailing comma or a closing parenthesis on its own line stays as it is)."""
    arguments: list[ast.AST] = [*call.args, *call.keywords]
    if not arguments:
        line, column = call.end_lineno or call.lineno, call.end_col_offset or 0  # 1-based: the ")"
        return TextEdit(line, column, line, column, keyword)
    last = max(arguments, key=lambda a: (a.end_lineno or 0, a.end_col_offset or 0))  # type: ignore[attr-defined]
    line, column = last.end_lineno, last.end_col_offset + 1  # type: ignore[attr-defined]
    return TextEdit(line, column, line, column, f", {keyword}")


def fixes(source: str, diagnostic: Diagnostic, result: FileResult) -> list[Fix]:
    if not _RETURNS_CACHE.match(diagnostic.message) or diagnostic.target is None:
        return []
    target = next((t for t in result.targets if t.name == diagnostic.target), None)
    tree = nodes.parse(source)
    if tree is None or target is None or target.line != diagnostic.line:
        return []
    scope = _scope(tree, target.line)
    if scope is None or any(isinstance(n, (ast.Name, ast.Attribute, ast.keyword, ast.Constant)) and "use_cache" in {getattr(n, a, None) for a in ("id", "attr", "arg", "value")} for s in scope for n in ast.walk(s)):
        return []
    calls = _calls(scope)
    for wanted in (lambda c: _callee(c).endswith("Config") and _callee(c) != "Config", lambda c: _callee(c) == "from_pretrained"):
        found = [c for c in calls if wanted(c)]
        if len(found) > 1:
            return []  # which one makes the exported model's config? not ours to guess
        if found:
            [call] = found
            if any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
                return []
            where = f"the config (`{_callee(call)}`)" if _callee(call) != "from_pretrained" else "`from_pretrained`"
            return [Fix(f"pass `use_cache=False` to {where}: the model returns tensors only", diagnostic, (_add_keyword(call, "use_cache=False"),), preferred=True)]
    return []
