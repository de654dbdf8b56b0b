"""``textDocument/inlayHint``: after each line, the dtype and shape the export recorded.

``y = self.block(x)  float32[batch, 8]``: the value of the last node the line
produced (``core/serde/located.py``: a node belongs to every line of this file in
its stack, so a call of a submodule shows the submodule's output), with torch's
symbols named after the user's ``Dim``; the tooltip names the node, its op and
torch's symbol, in the client's markup (plain text unless its hover takes markdown). Lines of ``forward`` and of every function and submodule it calls,
in the declaring file and in a model module (a view's targets keep their programs).

Like hover, the hints are built once per result, off the event loop
(:meth:`HintIndex.build`, called with the hover index), and a request is answered
from memory. When the buffer has changed since the result, a line whose text is
unchanged keeps its hint; any other line gets none. The setting ``inlay_hints``
turns them off; the client is asked to refresh (``workspace/inlayHint/refresh``)
when a result or that setting changes.
"""

from __future__ import annotations

import ast
import asyncio
import io
import logging
import re
import tokenize
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lsprotocol import types

from exportlens.core.model.results import FileResult
from exportlens.core.serde.located import Located, last_in_groups, programs
from exportlens.server.markup import Markup, content
from exportlens.server.positions import byte_column_to_units, split_lines

if TYPE_CHECKING:
    from exportlens.server.host import Host
    from exportlens.server.state import DocumentState

log = logging.getLogger(__name__)

INDEX_WAIT_S = 2.0
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_LABEL = 80  # characters; a longer label (a tuple of many tensors) is cut with "…"

# Statements that hold others: their own line (``for``, ``if ...:``) ends at the colon,
# not at the end of the block.
_COMPOUND = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.Match,
)


@dataclass(frozen=True)
class LineHint:
    line: int  # 0-based
    byte_column: int  # 0-based UTF-8 byte offset on ``line``: the end of the statement's code
    label: str
    tooltip: str


class HintIndex:
    def __init__(self, markup: Markup, hints: Iterable[LineHint] = ()) -> None:
        self.markup = markup  # what the tooltips are written in
        self._hints = sorted(hints, key=lambda h: (h.line, h.byte_column))

    @classmethod
    def build(cls, path: str, source: str, result: FileResult, markup: Markup) -> HintIndex:
        """Never raises: a result whose hints cannot be made has none (logged)."""
        try:
            return cls(markup, _hints(path, source, result, markup))
        except Exception:  # hints must never take the server down
            log.exception("inlay hints for %s could not be built", path)
            return cls(markup)

    def between(self, first: int, last: int) -> list[LineHint]:
        """The hints on lines ``first``..``last`` (0-based, inclusive)."""
        return [h for h in self._hints if first <= h.line <= last]

    def __len__(self) -> int:
        return len(self._hints)


def _hints(path: str, source: str, result: FileResult, markup: Markup) -> list[LineHint]:
    read = programs(result.targets)
    if not read:
        return []
    lines = split_lines(source)
    anchor = _anchors(source, lines)
    # The last node holding a tensor, per program, of each anchor (a statement's end),
    # whichever of the statement's lines named it.
    by_anchor = last_in_groups(path, read, lambda line: anchor(line) if 1 <= line <= len(lines) else None)
    return [
        LineHint(line - 1, column, _label(located), _tooltip(markup, located))
        for (line, column), located in sorted(by_anchor.items())
    ]


def _label(values: list[Located]) -> str:
    texts = list(dict.fromkeys(v.value or "" for v in values))
    label = texts[0] if len(texts) == 1 else " · ".join(f"{v.program.target.name}: {v.value}" for v in values)
    return label if len(label) <= MAX_LABEL else label[: MAX_LABEL - 1] + "…"


def _tooltip(m: Markup, values: list[Located]) -> str:
    parts = []
    for v in values:
        op = v.node.target.removeprefix("torch.ops.")
        names = v.program.dim_names
        used = {s for meta in v.node.meta if meta is not None for d in meta.shape for s in _SYMBOL.findall(str(d)) if s in names}
        symbols = "".join(f"\n\n{m.code(names[s])} is torch's {m.code(s)}" for s in sorted(used))
        parts.append(f"{v.program.target.name}: {m.code(v.node.name)} = {m.code(op)}, {v.value}{symbols}")
    return f"\n\n{m.rule()}\n\n".join(parts)


def _anchors(source: str, lines: list[str]) -> Callable[[int], tuple[int, int]]:
    """1-based line -> (1-based line, 0-based byte column) where its hint goes: the end
    of the simple statement holding the line (a call spread over three lines shows
    its value once, after the closing parenthesis), else the end of the line's code."""
    ends: dict[int, tuple[int, int]] = {}
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    if tree is not None:
        try:
            for node in ast.walk(tree):
                if isinstance(node, ast.stmt) and not isinstance(node, _COMPOUND) and node.end_lineno is not None and node.end_col_offset is not None:
                    end = (node.end_lineno, node.end_col_offset)
                    for line in range(node.lineno, node.end_lineno + 1):
                        # ``a = f(x); b = g(a)``: after the last statement, not inside the line
                        ends[line] = max(ends.get(line, end), end)
        except RecursionError:
            pass
    code_ends = _code_ends(source, lines)

    def anchor(line: int) -> tuple[int, int]:
        return ends.get(line) or (line, code_ends.get(line, len(lines[line - 1].rstrip().encode("utf-8", "surrogatepass"))))

    return anchor


def _code_ends(source: str, lines: list[str]) -> dict[int, int]:
    """Lines with a trailing comment -> the byte column where their code ends."""
    out: dict[int, int] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT and tok.start[0] <= len(lines):
                text = lines[tok.start[0] - 1][: tok.start[1]]
                out[tok.start[0]] = len(text.rstrip().encode("utf-8", "surrogatepass"))
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return out


def hints_in(state: DocumentState, current: list[str], first: int, last: int, encoding: str) -> list[types.InlayHint]:
    """The hints of lines ``first``..``last`` whose text is what the result was made from."""
    index = state.hints
    if index is None:
        return []
    out = []
    for hint in index.between(first, last):
        if not state.line_unchanged(current, hint.line):
            continue  # the line changed since the export
        text = current[hint.line]
        out.append(
            types.InlayHint(
                position=types.Position(hint.line, byte_column_to_units(text, hint.byte_column, encoding)),
                label=hint.label,
                kind=types.InlayHintKind.Type,
                tooltip=content(index.markup, hint.tooltip),
                padding_left=True,
            )
        )
    return out


def register(server: Host) -> None:
    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    async def on_inlay_hint(ls: Host, params: types.InlayHintParams) -> list[types.InlayHint]:
        try:
            if not ls.settings.inlay_hints:
                return []
            state = ls.documents.get(params.text_document.uri)
            if state is None:
                return []
            if state.hints is None and state.index_task is not None and not state.index_task.done():
                await asyncio.wait({state.index_task}, timeout=INDEX_WAIT_S)
            document = ls.workspace.get_text_document(params.text_document.uri)
            encoding = str(ls.workspace.position_encoding or "utf-16")
            return hints_in(state, split_lines(document.source), params.range.start.line, params.range.end.line, encoding)
        except Exception:
            log.exception("inlay hints failed")
            return []
