"""``exportlens.graph``: the exported graph as a list of nodes, each linked to its source.

``exportlens.showGraph`` gives torch's printed graph code; this view is for finding
your way between the graph and the code. One row per node: its name, its op (for an
input or output, its kind and target in the signature), the dtype and shape the
export recorded (torch's symbols named after the user's ``Dim``), and the project
line it came from -- the deepest frame of its stack in the declaring file or a local
module, the signature's line for inputs and outputs. Each ``file.py:LINE`` is a link
the editor jumps through.

With ``line`` (0-based, a line of the document) the view lists only the nodes that
line produced, of every target or of the one named: "what did this line become";
while that line's text is what the result was made from (else it says so).

Arguments: ``[{"uri": ..., "target"?: ..., "line"?: ...}]`` or ``[uri, target]``.
Returns ``{"title", "text", "links": [{"line", "start", "end", "uri", "range"}]}``:
``line`` a 0-based row of ``text``, ``[start, end)`` its UTF-16 columns of the
``file.py:LINE`` text, ``uri``/``range`` where it leads.

With ``"page": true`` the graph is a picture instead: the server builds Model
Explorer's graph JSON of each target (torch-free, :mod:`exportlens.core.picture`),
serves Model Explorer's page for it on 127.0.0.1 under a token random per session,
and returns ``{"title", "url"}``; the client opens ``url`` in a browser. A node
selected there comes back to the server, which asks the client to show its line
(``window/showDocument``). Needs the ``graph`` extra; without it the command fails
with the line that installs it.

The notification ``exportlens/cursor`` ``{"uri", "line"}`` (0-based; the VS Code
extension sends it while its picture is open) has every served page select the nodes
that line made; a new result of a document redraws its pages (:func:`refresh`, from
the export), which reload keeping their UI state.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, replace
from typing import Any

from lsprotocol import types
from pygls import uris
from pygls.exceptions import JsonRpcInvalidParams

from exportlens.core.model import repeated
from exportlens.core.model.results import FileResult
from exportlens.core.model.signature import SourceLine
from exportlens.core.picture.graph import Picture, pictures
from exportlens.core.picture.page import Page, WebAppMissing, web_app
from exportlens.core.picture.serve import PageServer
from exportlens.core.picture.shape import real_id
from exportlens.core.project.files import root_of
from exportlens.core.serde.codec import SchemaError
from exportlens.core.serde.located import Program, UserFrames, at_lines, programs, tensor_text, value_text
from exportlens.core.serde.reader import NodeModel

# A runtime import: pygls reads command handlers' type hints.
from exportlens.server.features import notebook_sync
from exportlens.server.host import Host
from exportlens.server.positions import UTF16, split_lines, units

GRAPH = "exportlens.graph"
CURSOR = "exportlens/cursor"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Row:
    name: str
    op: str
    value: str
    file: str | None  # real path
    line: int | None  # 1-based
    module: str = ""  # the innermost module the node was traced in ("layers.3.mlp")
    count: int = 1  # the rows of repeated layers it stands for (see ``_grouped``)


def _grouped(rows: list[_Row]) -> list[_Row]:
    """Repeated layers' nodes as one row each: the nodes of the same op, value and
    line in modules that differ only in their index (``layers.{}.mlp``), when there
    are at least ``MIN_GROUP`` of them, shown at the first with their count and the
    last's name. An 80-layer model's 6,000 nodes read as one layer's."""
    keys: list[tuple[object, ...] | None] = []
    counts: dict[tuple[object, ...], list[int]] = {}
    for i, r in enumerate(rows):
        pattern = repeated.pattern(r.module)
        if pattern is None:
            keys.append(None)
            continue
        key: tuple[object, ...] = (r.op, r.value, r.file, r.line, pattern)
        keys.append(key)
        counts.setdefault(key, []).append(i)
    out = []
    for i, r in enumerate(rows):
        found = keys[i]
        members = counts[found] if found is not None else [i]
        if len(members) < repeated.MIN_GROUP:
            out.append(r)
        elif members[0] == i:
            last = rows[members[-1]]
            out.append(replace(r, name=f"{r.name}…{last.name}", count=len(members)))
    return out


def _arguments(args: tuple[Any, ...]) -> tuple[str, str | None, int | None]:
    if len(args) == 1 and isinstance(args[0], dict):
        uri, target, line = args[0].get("uri"), args[0].get("target"), args[0].get("line")
    else:
        uri = args[0] if args else None
        target = args[1] if len(args) > 1 else None
        line = args[2] if len(args) > 2 else None
    if not isinstance(uri, str):
        raise JsonRpcInvalidParams(f"{GRAPH}: expected a document URI, got {uri!r}")
    if target is not None and not isinstance(target, str):
        raise JsonRpcInvalidParams(f"{GRAPH}: expected a target name, got {target!r}")
    if line is not None and (not isinstance(line, int) or isinstance(line, bool) or line < 0):
        raise JsonRpcInvalidParams(f"{GRAPH}: expected a 0-based line number, got {line!r}")
    return uri, target, line


def _source(where: SourceLine | None, result: FileResult) -> tuple[str | None, int | None]:
    if where is None or where.line < 1:
        return None, None
    return os.path.realpath(where.path or result.path), where.line


def _op(node: NodeModel) -> str:
    return node.target.removeprefix("torch.ops.") if node.op == "call_function" else node.op


def _rows(program: Program, result: FileResult, frames: UserFrames, only: set[str] | None) -> list[_Row]:
    sig = program.target.signature
    names = program.dim_names
    inputs = {s.arg.name: s for s in sig.inputs} if sig is not None else {}
    rows = []
    for node in program.model.nodes:
        if only is not None and node.name not in only:
            continue
        if node.op == "output":
            continue
        value = value_text(node.meta, names) or ""
        if node.op == "placeholder" and node.name in inputs:
            spec = inputs[node.name]
            file, line = _source(spec.source, result)
            op = spec.kind + (f" {spec.target}" if spec.target else "")
        else:
            frame = frames(node)
            file, line = (os.path.realpath(frame.file), frame.line) if frame is not None else (None, None)
            op = _op(node)
        rows.append(_Row(node.name, op, value, file, line, node.nn_module_stack[-1] if node.nn_module_stack else ""))
    if only is None and sig is not None:
        for out in sig.outputs:
            file, line = _source(out.source, result)
            meta = out.arg.meta
            rows.append(_Row(out.arg.name, f"output {out.kind}" + (f" {out.target}" if out.target else ""), tensor_text(meta, names) if meta else "", file, line))
    return rows


def _place(file: str, root: str) -> str:
    try:
        rel = os.path.relpath(file, root)
    except ValueError:
        return file
    return file if rel.startswith("..") else rel


def graph_view(state_path: str, result: FileResult, target: str | None, line: int | None) -> dict[str, Any]:
    """The view of ``result`` (the document's at ``state_path``) as returned to the client."""
    chosen = [t for t in result.targets if target is None or t.name == target]
    if not chosen:
        names = ", ".join(t.name for t in result.targets) or "none"
        raise JsonRpcInvalidParams(f"no target {target!r} in {os.path.basename(state_path)} (targets: {names})")
    read = programs(chosen)
    frames = UserFrames([result.path, state_path, *result.local_imports])
    root = root_of(state_path)
    here = os.path.basename(state_path)
    only: dict[int, set[str]] = {}
    if line is not None:
        for entry in at_lines(state_path, read).get(line + 1, []):
            only.setdefault(id(entry.program), set()).add(entry.node.name)
    text: list[str] = []
    links: list[dict[str, Any]] = []
    title = f"{here}:{line + 1}: nodes" if line is not None else f"{', '.join(t.name for t in chosen)}: graph"
    for t in chosen:
        program = next((p for p in read if p.target is t), None)
        if program is None:
            if line is None:
                text += [f"# {t.name}: no graph (the export {'failed' if t.status == 'error' else 'kept none'})", ""]
            continue
        every = _rows(program, result, frames, only.get(id(program), set()) if line is not None else None)
        if line is not None and not every:
            continue
        rows = _grouped(every)
        legend = ", ".join(f"{n} is torch's {s}" for s, n in sorted(program.dim_names.items()))
        shown = f", repeated layers' as one row each ({len(rows)} rows)" if len(rows) < len(every) else ""
        text.append(f"# {t.name}: {len(every)} node{'s' * (len(every) != 1)}{shown}" + (f" ({legend})" if legend else ""))
        widths = [max((len(getattr(r, f)) for r in rows), default=0) for f in ("name", "op")]
        widths.append(max((len(r.value + (f" ×{r.count}" if r.count > 1 else "")) for r in rows), default=0))
        for r in rows:
            value = r.value + (f" ×{r.count}" if r.count > 1 else "")
            row = f"{r.name:<{widths[0]}}  {r.op:<{widths[1]}}  {value:<{widths[2]}}"
            if r.file is not None and r.line is not None:
                place = f"{_place(r.file, root)}:{r.line}"
                start = units(row, UTF16) + 2
                links.append(
                    {
                        "line": len(text),
                        "start": start,
                        "end": start + units(place, UTF16),
                        "uri": uris.from_fs_path(r.file) or r.file,
                        "range": {"start": {"line": r.line - 1, "character": 0}, "end": {"line": r.line - 1, "character": 0}},
                    }
                )
                row = f"{row}  {place}"
            text.append(row.rstrip())
        text.append("")
    if line is not None and not links and not any(text):
        text = [f"# line {line + 1} of {here} produced no node of {'any target' if target is None else target}", ""]
    return {"title": title, "text": "\n".join(text), "links": links}


def _wants_page(args: tuple[Any, ...]) -> bool:
    return len(args) == 1 and isinstance(args[0], dict) and args[0].get("page") is True


@dataclass(frozen=True)
class _Shown:
    """What a served page shows: the document's targets (one, or all of them)."""

    uri: str
    target: str | None


class _Pages:
    """The session's page server, started at the first page asked for; a selected
    node of a page becomes ``window/showDocument`` on the event loop; the editor's
    cursor selects nodes in the pages (:meth:`cursor`); a new result of a document
    replaces its pages (:meth:`refresh`)."""

    def __init__(self) -> None:
        self.server: PageServer | None = None
        self.shown: dict[int, _Shown] = {}

    def url(self, ls: Host, loop: asyncio.AbstractEventLoop, page: Page, shown: _Shown) -> str:
        if self.server is None:
            self.server = PageServer(lambda number, model, node: self._open(ls, loop, number, model, node)).start()
            ls.threads.at_shutdown("the graph pages", self.server.close)  # its threads: ``threads``
        url = self.server.add(page)
        live = set(self.server.numbers())
        self.shown = {n: s for n, s in self.shown.items() if n in live}
        self.shown[int(url.rstrip("/").rsplit("/", 1)[1])] = shown
        return url

    def cursor(self, path: str, line: int) -> int:
        """Select, in every page, the nodes 1-based ``line`` of ``path`` made (in
        the first of its models that has any); the pages asked."""
        if self.server is None:
            return 0
        where = (os.path.realpath(path), line)
        asked = 0
        for number in self.server.numbers():
            page = self.server.page(number)
            if page is None:
                continue
            for model, picture in enumerate(page.pictures):
                nodes = picture.made.get(where)
                if nodes:
                    asked += self.server.select(number, model, nodes)
                    break
        return asked

    async def refresh(self, ls: Host, uri: str) -> None:
        """The pages of ``uri`` drawn anew from its current result (each page reloads,
        keeping its UI state); a result without a graph leaves them as they are."""
        server = self.server
        numbers = [n for n, s in self.shown.items() if s.uri == uri]
        state = ls.documents.get(uri)
        if server is None or not numbers or state is None or state.result is None:
            return
        loop = asyncio.get_running_loop()
        for number in numbers:
            try:
                found = await loop.run_in_executor(ls.threads.io, _pictures, state.path, state.result, self.shown[number].target)
            except JsonRpcInvalidParams:
                continue  # no graph now (a failed export): the page keeps the last one
            server.replace(number, Page(found, open=True))

    def _open(self, ls: Host, loop: asyncio.AbstractEventLoop, number: int, model: int, node: str) -> bool:
        """On the page server's thread: whether the node leads to a line."""
        page = self.server.page(number) if self.server is not None else None
        if page is None or not 0 <= model < len(page.pictures):
            return False
        # A stand-in of a shared value leads to the line of the node it stands for.
        source = page.pictures[model].sources.get(real_id(node))
        if source is None:
            return False
        where = types.Range(types.Position(source.line - 1, 0), types.Position(source.line - 1, 0))
        params = types.ShowDocumentParams(uri=uris.from_fs_path(source.file) or source.file, take_focus=True, selection=where)
        loop.call_soon_threadsafe(lambda: ls.background(ls.window_show_document_async(params), "showing a graph node's line"))
        return True


def _pictures(state_path: str, result: FileResult, target: str | None) -> list[Picture]:
    if target is not None and target not in {t.name for t in result.targets}:
        names = ", ".join(t.name for t in result.targets) or "none"
        raise JsonRpcInvalidParams(f"no target {target!r} in {os.path.basename(state_path)} (targets: {names})")
    try:
        found = pictures(result, state_path=state_path, root=root_of(state_path), target=target)
    except SchemaError as e:
        raise JsonRpcInvalidParams(f"the program cannot be read: {e}") from None
    if not found:
        raise JsonRpcInvalidParams(f"{os.path.basename(state_path)}: no graph (no target exported)")
    return found


_PAGES: dict[int, _Pages] = {}  # id(host) -> its pages: one server per process in practice


def refresh(server: Host, uri: str) -> None:
    """A new result for ``uri``: its open pictures are drawn again."""
    pages = _PAGES.get(id(server))
    if pages is not None and any(s.uri == uri for s in pages.shown.values()):
        server.background(pages.refresh(server, uri), "refreshing a graph picture")


def _cursor_arguments(params: Any) -> tuple[str, int] | None:
    get = params.get if isinstance(params, dict) else lambda k: getattr(params, k, None)
    uri, line = get("uri"), get("line")
    if not isinstance(uri, str) or not isinstance(line, int) or isinstance(line, bool) or line < 0:
        return None
    return uri, line


def register(server: Host) -> None:
    pages = _PAGES.setdefault(id(server), _Pages())

    @server.feature(CURSOR)
    def cursor(ls: Host, params: Any) -> None:
        """``exportlens/cursor`` ``{"uri", "line"}`` (0-based): the editor's cursor moved;
        the pictures select the nodes that line made, while the line is the text the
        result was made from."""
        try:
            found = _cursor_arguments(params)
            if found is None:
                log.debug("%s: ignored params %r", CURSOR, params)
                return
            uri, at = notebook_sync.in_module(ls, *found)
            if at is None:
                return  # a notebook cell that does not run: no node is there
            line = at
            state = ls.documents.get(uri)
            if state is not None and state.result_lines:
                current = split_lines(ls.workspace.get_text_document(uri).source)
                if not state.line_unchanged(current, line):
                    return  # the results' nodes at this number belong to another line
            pages.cursor(uris.to_fs_path(uri) or uri, line + 1)
        except Exception:  # noqa: BLE001 - a notification must not take the server down
            log.exception("%s failed", CURSOR)

    @server.command(GRAPH)
    async def graph(ls: Host, *args: Any) -> dict[str, Any]:
        uri, target, line = _arguments(args)
        if line is not None or not uri.startswith("file:"):
            uri, line = notebook_sync.in_module(ls, uri, line)
        state = ls.documents.get(uri)
        if state is None or state.result is None:
            raise JsonRpcInvalidParams(f"{uri} has no export result (is it open and does it declare or hold a target?)")
        if _wants_page(args):
            loop = asyncio.get_running_loop()
            found = await loop.run_in_executor(ls.threads.io, _pictures, state.path, state.result, target)
            try:
                web_app()
            except WebAppMissing as e:
                raise JsonRpcInvalidParams(str(e)) from None
            title = f"{', '.join(p.target for p in found)}: graph"
            return {"title": title, "url": pages.url(ls, loop, Page(found, open=True), _Shown(uri, target))}
        if line is not None:
            current = split_lines(ls.workspace.get_text_document(uri).source)
            if not state.line_unchanged(current, line):
                # The result is for other text: its nodes at this number belong to another line.
                here = os.path.basename(state.path)
                text = f"# line {line + 1} of {here} changed since the last export: save to export it again\n"
                return {"title": f"{here}:{line + 1}: nodes", "text": text, "links": []}
        # Reading the programs takes a moment on a large model: off the event loop.
        return await asyncio.get_running_loop().run_in_executor(ls.threads.io, graph_view, state.path, state.result, target, line)
