"""``banned-mutation/tensor-attribute``: a tensor attribute assigned outside
``__init__`` (``self.last = y * 2`` in ``forward``) that is not a registered buffer
-> register it as a buffer where ``__init__`` first assigns it.

The edit turns ``__init__``'s ``self.last = <expr>`` into
``self.register_buffer("last", <expr>, persistent=False)`` and leaves ``forward``
alone. Checked with torch 2.13: assigning a registered buffer in ``forward`` exports
as a buffer mutation (``BUFFER_MUTATION``, the new value copied into the buffer), so
the update is no longer dropped; in eager the assignment still replaces the tensor,
exactly as before. Non-persistent, so ``state_dict`` (and the checkpoints people
load) does not gain a key. What export cannot do: change the buffer's shape (an
update of another shape fails to export): the fix is preferred when the shapes are
known to fit (a literal constructor in ``__init__``, the recorded value at the
assignment, in every target that runs it), left out when they are known not to
(in any of them), and otherwise offered with a title
that says a matching shape is needed.

The same edit fixes a tensor attribute that ``forward`` updates in place
(``self.cache_k[:bsz, pos] = xk``, ``self.steps += 1``, ``self.cache.copy_(x)``, a
running average's chain ``self.avg.mul_(0.9).add_(x.mean(0) * 0.1)``: the error
export fails with). Checked with torch 2.13 on Meta's reference Llama's cache
pattern (slice assignment, and ``self.cache_k = self.cache_k.to(xq)`` beside it), and
on the running average's chain (exported, the outputs eager's): a registered
buffer's in-place update exports as a ``BUFFER_MUTATION``, and its shape cannot
change, so the fix is preferred.

Offered only when the edit is certain to run as written: the class is in this file,
its ``__init__`` assigns the attribute exactly once, to something that is not
``None``, after calling ``super().__init__()`` (``register_buffer`` needs it), and
the class body does not define the name (``register_buffer`` refuses an existing
attribute). Without such an assignment there is no known initial value: no fix.
"""

from __future__ import annotations

import ast
import re

from exportlens.core.fixes import nodes
from exportlens.core.fixes.model import Fix, replace_node, segment
from exportlens.core.fixes.shapes import assigned_shapes, broadcasts, literal_shape
from exportlens.core.model.results import Diagnostic, FileResult

_CLASS = re.compile(r"Register it in `(\w+)\.__init__`")


def _init(cls: ast.ClassDef) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)


def _calls_super_init(stmt: ast.stmt) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "__init__"
        for n in ast.walk(stmt)
    )


def _class_defines(cls: ast.ClassDef, name: str) -> bool:
    for node in cls.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def _value_line(stmt: ast.Assign | ast.AnnAssign, method: ast.AST) -> int:
    """The line whose last node is the assigned value: the statement's own, or for
    ``self.x = name`` the single-line assignment that last bound ``name`` before it."""
    value = stmt.value
    if not isinstance(value, ast.Name):
        return stmt.lineno
    bound = [
        n
        for n in ast.walk(method)
        if isinstance(n, ast.Assign)
        and n.lineno < stmt.lineno
        and n.lineno == n.end_lineno
        and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)
    ]
    return max(bound, key=lambda n: n.lineno).lineno if bound else stmt.lineno


def _in_place_call(node: ast.expr) -> bool:
    """``<receiver>.op_(...)``: a method with a trailing ``_`` (not a dunder)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    return node.func.attr.endswith("_") and not node.func.attr.endswith("__")


def _updated_in_place(stmt: ast.stmt, me: str) -> str | None:
    """The attribute ``stmt`` updates in place, when it does: ``self.x[...] = v``,
    ``self.x[...] += v``, ``self.x += v``, ``self.x.copy_(v)`` (a trailing ``_``) or a
    chain of such calls (``self.x.mul_(0.9).add_(v)``)."""
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = [t for t in stmt.targets if isinstance(t, ast.Subscript)]
    elif isinstance(stmt, ast.AugAssign):
        targets = [stmt.target]
    elif isinstance(stmt, ast.Expr) and _in_place_call(stmt.value):
        # A chain of in-place calls (``self.avg.mul_(0.9).add_(v)``, a running
        # average) updates its innermost receiver: each returns the tensor it updated.
        receiver: ast.expr = stmt.value
        while _in_place_call(receiver):
            assert isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute)
            receiver = receiver.func.value
        targets = [receiver]
    attrs = set()
    for target in targets:
        while isinstance(target, ast.Subscript):
            target = target.value
        attrs.add(nodes.self_attribute(target, me))
    return attrs.pop() if len(attrs) == 1 and None not in attrs else None


def fixes(source: str, diagnostic: Diagnostic, result: FileResult) -> list[Fix]:
    tree = nodes.parse(source)
    found = nodes.statement_at(tree, diagnostic) if tree is not None else None
    if tree is None or found is None:
        return []
    stmt, parents = found
    method = nodes.enclosing_function(parents)
    if method is None or not method.args.args:
        return []
    in_place = _updated_in_place(stmt, method.args.args[0].arg)
    if in_place is not None:
        attrs: set[str | None] = {in_place}
    elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        attrs = {nodes.self_attribute(t, method.args.args[0].arg) for t in targets}
    else:
        return []
    if len(attrs) != 1 or None in attrs:
        return []
    [attr] = attrs
    assert attr is not None
    named = _CLASS.search(diagnostic.message)
    enclosing = next((p for p in reversed(parents) if isinstance(p, ast.ClassDef)), None)
    owner_name = named.group(1) if named else enclosing.name if enclosing else None
    owners = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == owner_name]
    if len(owners) != 1 or _class_defines(owners[0], attr):
        return []
    [owner] = owners
    init = _init(owner)
    if init is None or not init.args.args:
        return []
    me = init.args.args[0].arg
    assignments = [
        n
        for n in ast.walk(init)
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
        and any(nodes.self_attribute(t, me) == attr for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))
    ]
    assign = assignments[0] if len(assignments) == 1 else None
    if not isinstance(assign, ast.Assign) or len(assign.targets) != 1:
        return []
    if assign not in init.body or (isinstance(assign.value, ast.Constant) and assign.value.value is None):
        return []  # conditional, or None: no initial tensor known to be there
    before = init.body[: init.body.index(assign)]
    if not any(_calls_super_init(s) for s in before):
        return []
    value = segment(source.split("\n"), assign.value)
    new = f"{me}.register_buffer({attr!r}, {value}, persistent=False)"
    if in_place is not None:
        # Updated in place: the buffer keeps the shape its __init__ gives it.
        title = f"register `{attr}` as a buffer in `{owner.name}.__init__` (export then records each in-place update)"
        return [Fix(title, diagnostic, (replace_node(assign, new),), preferred=True)]
    # The edit changes the class for every target that runs this assignment (each
    # reports it here), so the shapes must fit in each of them, not only in this one.
    assert isinstance(stmt, (ast.Assign, ast.AnnAssign))
    into, line = literal_shape(assign.value), _value_line(stmt, method)
    running = dict.fromkeys(
        [diagnostic.target]
        + [d.target for d in result.diagnostics if d.code == diagnostic.code and (d.line, d.column) == (diagnostic.line, diagnostic.column)]
    )
    shapes = [assigned_shapes(result, target, line) for target in running]
    assigned = None if any(s is None for s in shapes) else [v for s in shapes if s is not None for v in s]
    if into is not None and any(s is not None and not all(broadcasts(v, into) for v in s) for s in shapes):
        return []  # export would copy a value of another shape into the buffer: an export error
    if into is not None and assigned is not None:
        shape = ", ".join(map(str, into))
        title = f"register `{attr}` as a buffer in `{owner.name}.__init__` (shape [{shape}]; export copies each update into it)"
        return [Fix(title, diagnostic, (replace_node(assign, new),), preferred=True)]
    # The shapes are not known here: say what the edit does, and what it needs.
    title = f"register `{attr}` as a buffer in `{owner.name}.__init__` (export then copies each update into it: same shape needed)"
    return [Fix(title, diagnostic, (replace_node(assign, new),))]
