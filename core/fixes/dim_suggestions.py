"""``constraint-violation``: torch's own "Suggested fixes:" applied to the ``Dim``
declaration the diagnostic points at.

torch ends a constraint violation with the fixes it derived from the guards, one per
line: a new range (``batch = Dim('batch', max=8)``) or a constant (``batch = 4``). The
diagnostic's range is the declaring ``Dim(...)`` call (in ``batch = Dim(...)`` or
inline in ``dynamic_shapes``), so the fix replaces that call:

* a range keeps the dim dynamic: the call becomes torch's, under the user's own spelling
  of ``Dim`` (``torch.export.Dim``, an alias); preferred;
* a constant removes the dynamic dim, so its title says so ("make `batch` static (= 4)")
  and it is never preferred; the call becomes the number (``dynamic_shapes`` takes an
  int for a static size).

A one-line suggestion is offered only when it names the dim declared at the range
(changing another dim would leave the diagnostic). Checked with torch 2.13: both
edits export cleanly.

torch's suggestion can also take several lines: a derived dim (``x.view(x.shape[0] //
2, 2, -1)`` needs an even size) comes as a new root dim and the dim as an expression
of it::

    _frames = Dim('_frames', min=1, max=32)
    frames = 2*_frames

and constraints between dims as one line each (``dx = Dim('dx', max=63)``, ``dy = dx
+ 1``; ``dy = dx``). All of them are applied, as one fix, or none:

* each dim the suggestion names that the file declares, in the block that holds the
  diagnostic's ``Dim(...)`` call, as ``name = Dim("name", ...)`` (its only binding
  there), has that statement replaced by torch's line; a new root (a name nowhere in
  the file, which torch declares ``Dim('_frames', ...)`` and another line uses) goes
  on the line before the first statement that uses it; every ``Dim`` is the user's
  spelling of it;
* a dim declared inline in ``dynamic_shapes`` (``{0: Dim("frames", ...)}``) can be the
  only one the suggestion changes: its roots go on the lines before the statement that
  holds the call, and the call becomes torch's expression (``2*_frames``).

Offered only when every dim named is declared so (or is a new root), each line
comes after the dims it uses, and the message holds the whole suggestion (a message
cut short, ending in "…", may have lost lines: no fix); preferred unless a line makes a dim a constant (then
the title names the dims made static). Checked with torch 2.13 by exporting the
edited models (a derived dim declared by name and inline, ``dy = dx + 1``, ``dy =
dx``, a derived dim beside a new range): each exports cleanly.
"""

from __future__ import annotations

import ast
import re

from exportlens.core.fixes import nodes
from exportlens.core.fixes.model import Fix, insert_at, replace_node, segment
from exportlens.core.model.results import Diagnostic

_SUGGESTION = re.compile(r"^\s*(\w+) = (.+?)\s*$")
_RANGE = re.compile(r"^Dim\((['\"])(\w+)\1((?:, (?:min|max)=-?\d+)*)\)$")
_CONSTANT = re.compile(r"^-?\d+$")


def suggestions(message: str) -> list[tuple[str, str]]:
    """torch's suggested fixes, ``(name, right-hand side)``, from the lines after
    "Suggested fixes:" up to the first line that is not one."""
    at = message.find("Suggested fixes:")
    if at < 0:
        return []
    out: list[tuple[str, str]] = []
    following = message[at:].split("\n")[1:]
    for i, line in enumerate(following):
        m = _SUGGESTION.match(line)
        if m is None or not line.startswith(" "):
            if line.rstrip().endswith("…"):
                return []  # the message was cut short inside the suggestion: not all of it is here
            break
        if i == len(following) - 1 and line.rstrip().endswith("…"):
            return []
        out.append((m.group(1), m.group(2)))
    return out


def _declared(call: ast.AST) -> str | None:
    """The name ``Dim("batch", ...)`` declares, when ``call`` is such a call."""
    if not isinstance(call, ast.Call) or not call.args:
        return None
    func = call.func
    callee = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    first = call.args[0]
    if callee != "Dim" or not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    return first.value


def fixes(source: str, diagnostic: Diagnostic) -> list[Fix]:
    found = suggestions(diagnostic.message)
    tree = nodes.parse(source)
    if not found or tree is None:
        return []
    call = next((n for n in ast.walk(tree) if isinstance(n, ast.Call) and nodes.spans(n, diagnostic)), None)
    if call is None:
        return []
    if len(found) > 1 or not (_CONSTANT.match(found[0][1]) or _RANGE.match(found[0][1])):
        return _several(source, tree, call, diagnostic, found)
    [(name, value)] = found
    if _declared(call) != name:
        return []
    if _CONSTANT.match(value):
        # Never preferred: the program would accept only this size.
        return [Fix(f"make `{name}` static (= {value}): torch's suggested fix removes the dynamic dim", diagnostic, (replace_node(call, value),))]
    m = _RANGE.match(value)
    assert m is not None
    callee = segment(source.split("\n"), call.func)  # the user's own spelling of Dim
    new = f"{callee}({m.group(1)}{name}{m.group(1)}{m.group(3)})"
    return [Fix(f"apply torch's suggested fix: `{new}`", diagnostic, (replace_node(call, new),), preferred=True)]


def _rhs(value: str) -> ast.expr | None:
    """torch's right-hand side when it is one this module knows: a range, a constant,
    or an expression of dims (names, integers, ``+ - * //``)."""
    try:
        expr = ast.parse(value, mode="eval").body
    except SyntaxError:
        return None
    if _RANGE.match(value) or _CONSTANT.match(value):
        return expr
    allowed = (ast.BinOp, ast.Name, ast.Load, ast.Constant, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.UnaryOp, ast.USub)
    if not all(isinstance(n, allowed) for n in ast.walk(expr)):
        return None
    if any(isinstance(n, ast.Constant) and type(n.value) is not int for n in ast.walk(expr)):
        return None
    return expr


def _uses(expr: ast.expr) -> list[str]:
    return [n.id for n in ast.walk(expr) if isinstance(n, ast.Name)] if not isinstance(expr, ast.Call) else []


def _block_of(tree: ast.AST, node: ast.AST) -> tuple[list[ast.stmt], ast.stmt] | None:
    """The innermost statement holding ``node``, and the statement list it is in."""
    for found, parents in nodes.walk_with_parents(tree):
        if found is not node:
            continue
        chain = [*parents, node]
        at = max((i for i, p in enumerate(chain) if isinstance(p, ast.stmt)), default=None)
        if at is None or at == 0:
            return None
        stmt, parent = chain[at], chain[at - 1]
        assert isinstance(stmt, ast.stmt)
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and any(s is stmt for s in block):
                return block, stmt
        return None
    return None


def _bindings(block: list[ast.stmt], name: str) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for stmt in block:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []
        if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
            out.append(stmt)
    return out


def _starts_line(lines: list[str], stmt: ast.stmt) -> bool:
    return not lines[stmt.lineno - 1].encode("utf-8")[: stmt.col_offset].strip()


def _several(source: str, tree: ast.Module, call: ast.Call, diagnostic: Diagnostic, found: list[tuple[str, str]]) -> list[Fix]:
    """torch's suggestion of several lines (a derived dim, constraints between dims),
    applied whole: see the module's docstring."""
    names = [name for name, _ in found]
    here = _declared(call)
    if here is None or here not in names or len(set(names)) != len(names):
        return []
    parsed: dict[str, ast.expr] = {}
    for name, value in found:
        expr = _rhs(value)
        m = _RANGE.match(value)
        if expr is None or (m is not None and m.group(2) != name):
            return []
        parsed[name] = expr
    held = _block_of(tree, call)
    if held is None:
        return []
    block, holder = held
    lines = source.split("\n")
    callee = segment(lines, call.func)  # the user's own spelling of Dim
    everywhere = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        a.asname or a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names
    }
    used = {u for expr in parsed.values() for u in _uses(expr)}
    roots = [n for n in names if n != here and n not in everywhere]
    if any(not _RANGE.match(dict(found)[r]) or r not in used for r in roots):
        return []  # a name torch introduces is a root dim that another line uses
    declared: dict[str, ast.Assign] = {}
    for name in everywhere & (used | set(names)):
        bound = _bindings(block, name)
        if len(bound) == 1 and isinstance(bound[0], ast.Assign) and len(bound[0].targets) == 1 and _declared(bound[0].value) == name:
            declared[name] = bound[0]

    def text(name: str) -> str:
        value = dict(found)[name]
        return f"{name} = {callee}{value[len('Dim'):]}" if _RANGE.match(value) else f"{name} = {value}"

    def indent(stmt: ast.stmt) -> str:
        return lines[stmt.lineno - 1].encode("utf-8")[: stmt.col_offset].decode("utf-8")

    changed = [n for n in names if n not in roots]
    inline = here not in declared or declared[here].value is not call
    if inline and changed != [here]:
        return []  # a dim declared inline can only be changed alone
    if inline:
        # The roots before the statement holding the call; the call becomes the expression.
        if not _starts_line(lines, holder) or any(u not in roots and (u not in declared or declared[u].lineno >= holder.lineno) for u in _uses(parsed[here])):
            return []
        before = "".join(f"{text(r)}\n{indent(holder)}" for r in roots)
        edits = [insert_at(holder.lineno, holder.col_offset + 1, before), replace_node(call, dict(found)[here])]
        declare = "".join(f"declare `{text(r)}`, " for r in roots)
        return [Fix(f"apply torch's suggested fixes: {declare}`{here}` becomes `{dict(found)[here]}`", diagnostic, tuple(edits), preferred=True)]
    if any(n not in declared or not _starts_line(lines, declared[n]) for n in changed):
        return []
    edits = []
    placed: set[str] = set()
    for name in sorted(changed, key=lambda n: declared[n].lineno):
        stmt = declared[name]
        new: list[str] = []
        for u in _uses(parsed[name]):
            if u in roots and u not in placed:
                new.append(text(u))  # a new root, on the line before its first use
                placed.add(u)
            elif u not in roots and (u not in declared or declared[u].lineno >= stmt.lineno):
                return []  # used before the line that declares it
        new.append(text(name))
        edits.append(replace_node(stmt, ("\n" + indent(stmt)).join(new)))
    static = [n for n in names if _CONSTANT.match(dict(found)[n])]
    lines_said = "; ".join(text(n) for n in [*roots, *changed])
    if static:
        said = ", ".join(f"`{n}`" for n in static)
        title = f"apply torch's suggested fixes (`{lines_said}`): they make {said} static"
        return [Fix(title, diagnostic, tuple(edits))]
    return [Fix(f"apply torch's suggested fixes: `{lines_said}`", diagnostic, tuple(edits), preferred=True)]
