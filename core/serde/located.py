"""A program's nodes at the lines of one file: what each line of the user's code became.

Why: an editor shows, after each line of ``forward`` (and of the functions and
submodules it calls), the dtype and shape the export recorded for it, and lists the
nodes a line produced. torch keeps each node's Python stack (``stack_trace``); a
node belongs to every line of the file among its frames -- the submodule's own line
*and* the forward line that called the submodule -- so ``y = self.block(x)`` shows
the block's output, the last value its call produced. The deepest frame alone would
often be torch's own file (``nn/modules/linear.py`` for ``self.lin(x)``).

Torch-free: works on :func:`exportlens.core.serde.reader.read_program`'s model.
Frames name files as the job saw them; they are compared by real path.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from exportlens.core.model.results import TargetResult
from exportlens.core.model.signature import TensorMeta, named_dims
from exportlens.core.serde.codec import SchemaError
from exportlens.core.serde.reader import NodeModel, ProgramModel, SourceLocation, read_program

__all__ = ["Located", "Program", "at_lines", "last_in_groups", "UserFrames", "programs", "read", "tensor_text", "value_text"]

log = logging.getLogger(__name__)

G = TypeVar("G", bound=Hashable)


@dataclass(frozen=True)
class Program:
    """A target's program, read."""

    target: TargetResult
    model: ProgramModel

    @property
    def dim_names(self) -> Mapping[str, str]:
        sig = self.target.signature
        return sig.dim_names if sig is not None else {}


@dataclass(frozen=True)
class Located:
    """One node a line produced."""

    program: Program
    node: NodeModel
    line: int  # 1-based, in the file asked for

    @property
    def value(self) -> str | None:
        return value_text(self.node.meta, self.program.dim_names)


@functools.lru_cache(maxsize=16)
def read(data: bytes) -> ProgramModel:
    """:func:`read_program`, once per program: the inlay hints, the graph view and the
    quick fixes each read the same target's bytes (a few ms for a large model, on the
    event loop for a code action). Raises ``SchemaError`` (never cached) as it does."""
    return read_program(data)


def programs(targets: Iterable[TargetResult]) -> list[Program]:
    """Each exported target's program; one that cannot be read is left out (logged):
    the editor features built on it are a nicety, never a reason to fail."""
    out: list[Program] = []
    for t in targets:
        if not t.program:
            continue
        try:
            out.append(Program(t, read(bytes(t.program))))
        except SchemaError as e:
            log.warning("the program of %s cannot be read: %s", t.name, e)
    return out


def tensor_text(meta: TensorMeta, names: Mapping[str, str]) -> str:
    """``float32[batch, 16]``: the dtype and shape, symbols named after the user's ``Dim``."""
    return f"{meta.dtype}[{', '.join(named_dims(str(d), names) for d in meta.shape)}]"


def value_text(metas: tuple[TensorMeta | None, ...], names: Mapping[str, str]) -> str | None:
    """A node's value as one label: a tensor, or a tuple of them (``…`` for a part
    that is no tensor); None when it holds no tensor at all."""
    if not any(m is not None for m in metas):
        return None
    if len(metas) == 1 and metas[0] is not None:
        return tensor_text(metas[0], names)
    return "(" + ", ".join(tensor_text(m, names) if m is not None else "…" for m in metas) + ")"


class _RealPaths:
    """``os.path.realpath`` once per distinct file name of the traces."""

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}

    def __call__(self, path: str) -> str:
        real = self._seen.get(path)
        if real is None:
            try:
                real = os.path.realpath(path)
            except (OSError, ValueError):
                real = path
            self._seen[path] = real
        return real


def at_lines(path: str, read: Iterable[Program]) -> dict[int, list[Located]]:
    """The computing nodes of each line of ``path`` (1-based), in graph order per
    program, programs in the order given. A node counts once per line even when a
    line appears twice in its stack (recursion)."""
    real = _RealPaths()
    want = real(path)
    found: dict[int, list[Located]] = {}
    for program in read:
        for node in program.model.nodes:
            if node.op != "call_function":
                continue
            lines = {f.line for f in node.frames if real(f.file) == want}
            for line in sorted(lines):
                found.setdefault(line, []).append(Located(program, node, line))
    return found


def last_in_groups(path: str, read: Iterable[Program], group: Callable[[int], G | None]) -> dict[G, list[Located]]:
    """For each group of lines of ``path`` (``group(line)``, 1-based; None leaves the
    line out), the node of each program that came last in its graph among those the
    group's lines produced holding a tensor, programs in the order given. One pass,
    no list of every node per line: the call of a layer in an 80-layer loop names
    thousands of nodes, of which the inlay hints show one per program."""
    real = _RealPaths()
    want = real(path)
    found: dict[G, list[Located]] = {}
    for program in read:
        last: dict[G, tuple[NodeModel, int]] = {}
        for node in program.model.nodes:  # graph order: a later node replaces an earlier
            if node.op != "call_function" or not any(m is not None for m in node.meta):
                continue
            for line in {f.line for f in node.frames if real(f.file) == want}:
                key = group(line)
                if key is not None:
                    last[key] = (node, line)
        for key, (node, line) in last.items():
            found.setdefault(key, []).append(Located(program, node, line))
    return found


class UserFrames:
    """The deepest frame of a node in one of ``files`` (the project's: the declaring
    file and its local modules): where the user's code made it, or None."""

    def __init__(self, files: Iterable[str]) -> None:
        self._real = _RealPaths()
        self._wanted = {self._real(f) for f in files}

    def __call__(self, node: NodeModel) -> SourceLocation | None:
        for frame in reversed(node.frames):
            if self._real(frame.file) in self._wanted:
                return frame
        return None
