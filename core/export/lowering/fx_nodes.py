"""Where a lowering's finding comes from: the fx node behind a failure, its user line, its op.

Every destination fails the same ways -- an exception raised while some converter or
pass was handling one node, a node whose op the destination cannot take -- and every
finding must stand at the user's line that made the node. A node keeps that line in
its ``stack_trace`` through ``run_decompositions`` and ExecuTorch's edge passes, so
the line is read from there, the deepest frame in the user's files. Runs in the job
process (torch).
"""

from __future__ import annotations

import re
from typing import Any

from exportlens.core.model.signature import SourceLine
from exportlens.core.source.frames import Frame, frames_in_text
from exportlens.core.source.project import UserSources

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MESSAGE_MAX = 1200  # characters of a library's message kept in a diagnostic


def chain(e: BaseException) -> list[BaseException]:
    """``e`` and the exceptions it was raised from or while handling, outermost first."""
    out: list[BaseException] = []
    current: BaseException | None = e
    while current is not None and current not in out and len(out) < 32:
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def failing_node(errors: list[BaseException]) -> Any:
    """The fx node a converter was handling when it failed: the ``node`` local of the
    innermost frame that has one (their errors name the node only in text)."""
    import torch

    found = None
    for e in errors:
        tb = e.__traceback__
        while tb is not None:
            node = tb.tb_frame.f_locals.get("node")
            if isinstance(node, torch.fx.Node) and node.op == "call_function":
                found = node
            tb = tb.tb_next
        if found is not None:
            return found
    return None


def node_line(node: Any, sources: UserSources) -> SourceLine | None:
    """The statement in the user's files that made ``node`` (the deepest such frame:
    the model file, or a local module it imports, whose lines carry their path)."""
    trace = node.meta.get("stack_trace") if node is not None else None
    if not isinstance(trace, str):
        return None
    frame = sources.deepest(Frame(file, line, function) for file, line, function in frames_in_text(trace))
    return sources.statement(frame) if frame is not None else None


def op_name(target: Any) -> str:
    """``mylib::weird``, ``aten::sum.dim_IntList``, ``aten::sort.values``: the op as its
    schema names it (an ``OpOverload``'s or an edge op's), the default overload bare."""
    schema = getattr(target, "_schema", None)
    name = getattr(schema, "name", None)
    if isinstance(name, str):
        overload = getattr(schema, "overload_name", "")
        return name + (f".{overload}" if overload and overload != "default" else "")
    return str(target)


def op_expression(target: Any) -> str:
    """How the user's code names an op: ``torch.ops.mylib.weird.default``."""
    return f"torch.ops.{target}" if hasattr(target, "_schema") else getattr(target, "__name__", str(target))


def text(e: BaseException) -> str:
    """``Type: message``, without terminal colours, cut to a diagnostic's length."""
    message = _ANSI.sub("", str(e)).strip()
    if len(message) > _MESSAGE_MAX:
        message = message[:_MESSAGE_MAX] + " ..."
    return f"{type(e).__name__}: {message}" if message else type(e).__name__


def graph_modules(root: Any) -> list[Any]:
    """The program's graph module and those of its control-flow branches."""
    import torch

    out = [root]
    for _, child in root.named_children():
        if isinstance(child, torch.fx.GraphModule):
            out.extend(graph_modules(child))
    return out
