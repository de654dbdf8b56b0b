"""Where a lowering's finding comes from: the fx node behind a failure, its user line, its op.

Every destination fails the same ways -- an exception raised while some converter or
pass was handling one node, a node whose op the destination cannot take -- and every
finding must stand at the user's line that made the node. A node keeps that line in
its ``stack_trace`` through ``run_decompositions`` and ExecuTorch's edge passes, so
the line is read from there, the deepest frame in the model file. Runs in the job
process (torch).
"""

from __future__ import annotations

import re
from typing import Any

from exportlens.core.export.loader import Loaded
from exportlens.core.model.signature import SourceLine
from exportlens.core.source.frames import frames_in_text, same_file
from exportlens.core.source.spans import statement_at

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


def node_line(node: Any, loaded: Loaded) -> SourceLine | None:
    """The statement in the model file that made ``node`` (the deepest such frame)."""
    trace = node.meta.get("stack_trace") if node is not None else None
    if not isinstance(trace, str):
        return None
    lines = [line for file, line, _ in frames_in_text(trace) if same_file(file, loaded.path)]
    return statement_at(loaded.index, lines[-1]) if lines else None


def op_name(target: Any) -> str:
    """``mylib::weird``, ``aten::sort.values``: the op as its schema names it."""
    name = getattr(target, "_name", None) if hasattr(target, "_schema") else None  # an OpOverload: "mylib::weird"
    overload = getattr(target, "_overloadname", "")
    if isinstance(name, str):
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
