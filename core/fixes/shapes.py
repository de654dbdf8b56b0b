"""Shapes a fix needs to know: what the export recorded for a line, and the shape
of a tensor made by a literal constructor (``torch.zeros(2, 4)``).

A registered buffer that ``forward`` assigns is exported as a copy into the buffer,
so the fix that registers one holds only when each assigned value broadcasts to the
buffer's shape. The value's shape is in the program the export recorded (the last
node the assignment's line made, each time it ran); the buffer's is known without
running anything only for a constructor with literal sizes. Torch-free.
"""

from __future__ import annotations

import ast
import os

from exportlens.core.model.results import FileResult
from exportlens.core.serde.codec import SchemaError
from exportlens.core.serde.located import read

Shape = tuple[int, ...]

# Constructors whose leading positional arguments (or one tuple/list) are the sizes.
_SIZED = {"zeros", "ones", "empty", "randn", "rand"}
_FILLED = {"full"}  # torch.full(size, value): the size is the first argument


def _ints(nodes: list[ast.expr]) -> Shape | None:
    out: list[int] = []
    for n in nodes:
        if not (isinstance(n, ast.Constant) and type(n.value) is int and n.value >= 0):
            return None
        out.append(n.value)
    return tuple(out)


def literal_shape(expr: ast.expr) -> Shape | None:
    """``torch.zeros(2, 4)`` / ``torch.ones((2, 4), dtype=...)`` / ``torch.full((2,), 0.0)`` -> (2, 4) / (2,)."""
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and isinstance(expr.func.value, ast.Name) and expr.func.value.id == "torch"):
        return None
    name, args = expr.func.attr, expr.args
    if any(k.arg in {"size", "out"} or k.arg is None for k in expr.keywords):
        return None
    if name in _FILLED:
        args = args[:1]
    elif name not in _SIZED:
        return None
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        return _ints(list(args[0].elts))
    return _ints(list(args)) if args else None


def assigned_shapes(result: FileResult, target: str | None, line: int) -> list[Shape] | None:
    """The shape of each value ``line`` of ``result``'s file assigned in ``target``'s
    program (the last node of each consecutive run of nodes made there); None when
    unknown (no program, a node without a static shape, the line made none)."""
    found = next((t for t in result.targets if t.name == target and t.program), None)
    if found is None:
        return None
    try:
        program = read(bytes(found.program))
    except SchemaError:
        return None
    here = os.path.realpath(result.path)

    def at_line(index: int) -> bool:
        source = program.nodes[index].source if 0 <= index < len(program.nodes) else None
        return source is not None and source.line == line and os.path.realpath(source.file) == here

    shapes: list[Shape] = []
    for i, node in enumerate(program.nodes):
        if not at_line(i) or at_line(i + 1):
            continue
        if len(node.meta) != 1 or node.meta[0] is None or not all(type(d) is int for d in node.meta[0].shape):
            return None  # symbolic, or not one tensor: nothing to prove with
        shapes.append(tuple(int(d) for d in node.meta[0].shape))
    return shapes or None


def broadcasts(value: Shape, into: Shape) -> bool:
    """Whether ``copy_`` of a ``value``-shaped tensor into an ``into``-shaped one works."""
    if len(value) > len(into):
        return False
    return all(v in (b, 1) for v, b in zip(reversed(value), reversed(into), strict=False))  # the value may have fewer dims
