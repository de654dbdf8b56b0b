"""Random numbers in a program: which ops draw them, and which outputs they reach.

A VAE's ``eps = torch.randn_like(std)``, a sampler's ``torch.multinomial``, dropout in
training mode: every run draws other numbers, so the lowered program's outputs and
eager PyTorch's differ whatever either runtime does, and comparing them value by value
would report a mismatch that is no finding. An op draws random numbers when torch
tags it ``nondeterministic_seeded`` (``aten::randn_like``, ``aten::rand``,
``aten::bernoulli``, ``aten::multinomial``, ``aten::native_dropout``, ...); an output
that depends on one, through any chain of nodes, is compared by shape and dtype
only, and says which line drew the numbers. Runs in the job process (torch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exportlens.core.export.lowering import fx_nodes
from exportlens.core.model.signature import SourceLine


@dataclass(frozen=True)
class Draw:
    """One random op of the program and the user's line that calls it."""

    op: str  # "aten::randn_like"
    where: SourceLine | None
    nth: int = 0  # the program's how-many-th node of this op (from 0)

    def text(self, path: str) -> str:
        """```aten::randn_like` at vae.py:30``."""
        import os

        if self.where is None:
            return f"`{self.op}`"
        return f"`{self.op}` at {os.path.basename(self.where.path or path)}:{self.where.line}"


def is_random(node: Any) -> bool:
    """``node`` calls an op that draws random numbers."""
    import torch

    if node.op != "call_function":
        return False
    tags = getattr(node.target, "tags", ()) or ()
    if torch.Tag.nondeterministic_seeded not in tags:
        return False
    # Ops that draw only when asked: attention with ``dropout_p=0.0``, dropout with
    # ``p=0`` or ``train=False`` draw nothing.
    schema = getattr(node.target, "_schema", None)
    for i, argument in enumerate(getattr(schema, "arguments", ())):
        value = node.args[i] if i < len(node.args) else node.kwargs.get(argument.name, argument.default_value)
        if argument.name in ("dropout_p", "p") and isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
            return False
        if argument.name == "train" and value is False:
            return False
    return True


def random_outputs(ep: Any, line_of: Any) -> dict[int, tuple[Draw, ...]]:
    """For each user output (its position among the user outputs) that depends on a
    random op, the draws it depends on, in graph order; ``line_of(node)`` is the user's
    line of a node."""
    from torch.export.graph_signature import OutputKind

    reached: dict[Any, tuple[Any, ...]] = {}
    nth: dict[Any, int] = {}
    counts: dict[str, int] = {}
    for node in ep.graph.nodes:
        inputs: list[Any] = []
        for parent in node.all_input_nodes:
            for draw in reached.get(parent, ()):
                if draw not in inputs:
                    inputs.append(draw)
        if is_random(node):
            inputs.append(node)
            op = fx_nodes.op_name(node.target)
            nth[node], counts[op] = counts.get(op, 0), counts.get(op, 0) + 1
        if inputs:
            reached[node] = tuple(inputs)
    output = next(n for n in ep.graph.nodes if n.op == "output")
    values = list(output.args[0]) if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
    out: dict[int, tuple[Draw, ...]] = {}
    position = 0
    for spec, value in zip(ep.graph_signature.output_specs, values, strict=False):
        if spec.kind != OutputKind.USER_OUTPUT:
            continue
        draws = reached.get(value, ()) if hasattr(value, "op") else ()
        if draws:
            out[position] = tuple(Draw(fx_nodes.op_name(n.target), line_of(n), nth[n]) for n in draws)
        position += 1
    return out


def describe(draws: tuple[Draw, ...], path: str) -> str:
    """``depends on random numbers (`aten::randn_like` at vae.py:30)``."""
    seen: list[str] = []
    for d in draws:
        text = d.text(path)
        if text not in seen:
            seen.append(text)
    return f"depends on random numbers ({', '.join(seen)})"


def drawn_lines(built: Any, sources: Any) -> list[tuple[str, SourceLine]]:
    """``(op, line)`` for each random op the model calls when run eagerly on copies of
    its example inputs, at the deepest of the user's lines on the stack: the
    ``eps = torch.randn_like(std)`` inside a helper method, where the program's node
    remembers only the ``forward`` line that called it. Empty when the run fails."""
    import sys
    from types import FrameType

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from exportlens.core.export.lowering.outputs import eager_outputs
    from exportlens.core.source.frames import Frame

    found: list[tuple[str, SourceLine]] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()):
                frames = []
                frame: FrameType | None = sys._getframe(1)
                while frame is not None:
                    frames.append(Frame(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
                    frame = frame.f_back
                mine = sources.deepest(reversed(frames))
                if mine is not None:
                    found.append((fx_nodes.op_name(func), sources.statement(mine)))
            return func(*args, **(kwargs or {}))

    try:
        with Record():
            eager_outputs(built)
    except Exception:  # noqa: BLE001 - the lines are a nicety: the nodes' lines stand
        return []
    return found


def placed(draw: Draw, drawn: list[tuple[str, SourceLine]]) -> Draw:
    """``draw`` at the deeper line the eager run saw: the program's n-th
    ``aten::randn_like`` is the eager run's n-th, when both made one."""
    same = [where for op, where in drawn if op == draw.op]
    return Draw(draw.op, same[draw.nth], draw.nth) if draw.nth < len(same) else draw
