"""A cached result with its lines moved to a new text of the same code. Torch-free.

Why: after an edit that only touched comments or blank lines
(``exportlens.core.source.tokens``), the export would produce the same result with
other line numbers. The same holds for a local module the model imports. Instead of
running it, every line the result shows is mapped, each by the move of the file it
lives in (the declaring file and each moved module, told apart by path):
diagnostics (start, end, related locations), target lines, the source line of each
signature spec, and the line numbers inside text -- torch's messages, stack traces
and graph code quote ``File "model.py", line 12`` and ``model.py:12`` -- including
the stack traces, locations and diagnostics inside each target's program bytes.

Never a result a real export would contradict: :func:`remap` returns None (the
caller exports) when a line it must map has no image (it was not a line of code),
when a diagnostic sits at line 1 and line 1's code moved (line 1 is also the
file-level default, so which one it is cannot be told), or when text in the result
quotes a line whose text changed (a trailing comment edited: torch quotes the whole
line, so the message would be stale), or a file quoted by its bare name could be two
files of the run whose lines moved differently.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import replace
from typing import Any

import msgpack

from exportlens.core.disk.states import ABSENT, dependency_bytes, file_state
from exportlens.core.model.results import Diagnostic, FileResult, Related, TargetResult
from exportlens.core.model.signature import Signature, SourceLine
from exportlens.core.serde import schema as S
from exportlens.core.serde.codec import SchemaError, unpack
from exportlens.core.source.tokens import LineMap, line_map, old_line_text


class Unmappable(Exception):
    """A line or a quote that cannot be moved soundly: export instead."""


class FileMap:
    """One file's move: its old bytes (for quotes) and its line map."""

    def __init__(self, path: str, old: bytes, lines: LineMap) -> None:
        self.names = {os.path.abspath(path), os.path.realpath(path)}
        self.base = os.path.basename(path)
        self.lines = lines
        self.quotes = [q for q in (old_line_text(old, n).strip() for n in sorted(lines.changed)) if q]
        self.ref = re.compile(
            r"(?P<p>[^\s\"'(<>:]*" + re.escape(self.base) + r")(?P<sep>\", line |, line | line |:)(?P<n>\d+)"
        )

    def owns(self, path: str | None) -> bool:
        return path is not None and (path in self.names or os.path.realpath(path) in self.names)

    def line(self, n: int) -> int:
        mapped = self.lines.lines.get(n)
        if mapped is not None and (n != 1 or mapped == 1):
            return mapped
        if n == 1 and mapped is None:
            return 1  # a file-level default at a comment line: a real export says 1 too
        if n <= 0:
            return n
        raise Unmappable(f"line {n}")

    def names_me(self, written: str) -> bool:
        """Whether a path as text quotes it: whole, or a trailing part of it."""
        return _names(self.names, self.base, written)

    def check_quotes(self, s: str) -> None:
        for quote in self.quotes:
            if quote in s:
                raise Unmappable(f"quotes an edited line: {quote!r}")


def _names(names: set[str], base: str, written: str) -> bool:
    """Whether ``written`` (a path as text) quotes the file known by ``names``."""
    if written == base or written in names:
        return True
    return any(name.endswith("/" + written.lstrip("./")) for name in names)


class Mapper:
    """Every file's move; files not in ``maps`` keep their lines."""

    def __init__(self, own: str, maps: list[FileMap], files: tuple[str, ...] = ()) -> None:
        self.own = own
        self.maps = maps
        self._owner: dict[str, FileMap | None] = {}
        # Maps by basename (torch may quote a file by its name alone), and the run's
        # other files of that name, which keep their lines: a quote that could be
        # either and would move differently is not guessed.
        self.by_base: dict[str, list[FileMap]] = {}
        for m in maps:
            self.by_base.setdefault(m.base, []).append(m)
        self.kept: dict[str, list[set[str]]] = {}
        for path in (own, *files):
            if not any(m.owns(path) for m in maps) and os.path.basename(path) in self.by_base:
                self.kept.setdefault(os.path.basename(path), []).append({os.path.abspath(path), os.path.realpath(path)})

    def _for(self, path: str | None) -> FileMap | None:
        where = path if path is not None else self.own
        if where not in self._owner:  # a program names the same few files on every node
            self._owner[where] = next((m for m in self.maps if m.owns(where)), None)
        return self._owner[where]

    def line(self, path: str | None, n: int) -> int:
        m = self._for(path)
        return n if m is None else m.line(n)

    def end(self, path: str | None, n: int | None) -> int | None:
        return None if n is None else self.line(path, n)

    def text(self, s: str) -> str:
        for m in self.maps:
            m.check_quotes(s)
        for base, group in self.by_base.items():
            if base in s:  # one pass per name: a line moved once, never twice
                s = group[0].ref.sub(functools.partial(self._sub, group), s)
        return s

    def _sub(self, group: list[FileMap], found: re.Match[str]) -> str:
        written, n = found.group("p"), int(found.group("n"))
        images = {m.line(n) for m in group if m.names_me(written)}
        if not images:
            return found.group(0)
        if any(_names(names, group[0].base, written) for names in self.kept.get(group[0].base, [])):
            images.add(n)  # an unmoved file of the same name may be the one quoted
        if len(images) > 1:
            raise Unmappable(f"{written}:{n} may name more than one file")
        return f"{written}{found.group('sep')}{images.pop()}"

    def source(self, s: SourceLine | None) -> SourceLine | None:
        if s is None:
            return None
        path = getattr(s, "path", None)
        return replace(s, line=self.line(path, s.line), end_line=self.end(path, s.end_line))

    def diagnostic(self, d: Diagnostic) -> Diagnostic:
        path = getattr(d, "path", None)
        related = tuple(self.related(r) for r in d.related)
        return replace(d, message=self.text(d.message), line=self.line(path, d.line), end_line=self.end(path, d.end_line), related=related)

    def related(self, r: Related) -> Related:
        return replace(r, line=self.line(r.path, r.line), message=self.text(r.message))

    def signature(self, sig: Signature | None) -> Signature | None:
        if sig is None:
            return None
        ins = tuple(replace(i, source=self.source(i.source)) for i in sig.inputs)
        outs = tuple(replace(o, source=self.source(o.source)) for o in sig.outputs)
        return replace(sig, inputs=ins, outputs=outs)

    def target(self, t: TargetResult) -> TargetResult:
        return replace(
            t,
            line=self.line(None, t.line),
            signature=self.signature(t.signature),
            module_class=self.source(t.module_class),
            graph=self.text(t.graph),
            program=self.program(t.program) if t.program else t.program,
        )

    def program(self, data: bytes) -> bytes:
        """The program bytes with their stack traces, locations and diagnostics moved."""
        try:
            doc = unpack(data)
        except SchemaError as e:
            raise Unmappable(f"program: {e}") from None
        if not isinstance(doc, dict):
            raise Unmappable("program: not a map")
        strings = doc.get(S.P_STRINGS)
        if not isinstance(strings, list):
            raise Unmappable("program: no string table")
        doc[S.P_STRINGS] = [self.text(s) if isinstance(s, str) else s for s in strings]
        self._graph(doc.get(S.P_GRAPH), strings)
        for d in doc.get(S.P_DIAGNOSTICS) or []:
            if isinstance(d, list) and len(d) >= 5:
                d[1] = self.text(d[1]) if isinstance(d[1], str) else d[1]
                d[2] = self.line(None, d[2]) if isinstance(d[2], int) else d[2]
                d[4] = self.line(None, d[4]) if isinstance(d[4], int) else d[4]
        return msgpack.packb(dict(sorted(doc.items())), use_bin_type=True)

    def _graph(self, graph: Any, strings: list[Any]) -> None:
        if not isinstance(graph, list) or len(graph) <= S.G_SUBGRAPHS:
            return
        for node in graph[S.G_NODES] or []:
            meta = node[S.N_META] if isinstance(node, list) and len(node) > S.N_META else None
            where = meta[S.M_LOCATION] if isinstance(meta, list) and len(meta) > S.M_LOCATION else None
            if isinstance(where, list) and len(where) >= 2 and isinstance(where[0], int) and isinstance(where[1], int):
                path = strings[where[0]] if 0 <= where[0] < len(strings) else None
                m = self._for(path) if isinstance(path, str) else None
                if m is not None:
                    where[1] = m.line(where[1])
        for entry in graph[S.G_SUBGRAPHS] or []:
            if isinstance(entry, list) and len(entry) == 2:
                self._graph(entry[1], strings)


def remap(result: FileResult, maps: list[FileMap]) -> FileResult | None:
    """``result`` with every line of the files in ``maps`` moved, or None when that
    cannot be done soundly (see the module's docstring)."""
    if any(d.code == "syntax-error" for d in result.diagnostics):
        return None  # the tokenizer's view and the compiler's differ exactly there
    m = Mapper(result.path, maps, result.local_imports)
    try:
        return replace(
            result,
            diagnostics=tuple(m.diagnostic(d) for d in result.diagnostics),
            targets=tuple(m.target(t) for t in result.targets),
            output_tail=m.text(result.output_tail),
        )
    except (Unmappable, ValueError, TypeError, IndexError, KeyError):
        return None


def moved_modules(deps: list[str], states: list[Any], texts: list[Any]) -> tuple[list[FileMap], list[str]] | None:
    """The line maps of the local modules that changed since the export, each from the
    text the export ran to its bytes now, and every dependency's state now (what the
    moved result stands for: a result that kept the old hashes would look stale to
    whoever compares them with the files); None when a module changed in more than
    comments and blank lines, spells a way to see its own source, or is not a module
    whose text was kept (a project file the model read, a module that was absent)."""
    maps = []
    now_states = []
    for dep, state, old in zip(deps, states, texts, strict=True):
        if not isinstance(state, str):
            return None
        # The state first: a project file the model read may be a checkpoint of many
        # GB, known by its metadata; only a changed module's text is read.
        digest = file_state(dep)
        if digest is None:
            return None  # unreadable
        now_states.append(digest)
        if digest == state:
            continue
        if digest == ABSENT or not isinstance(old, bytes):
            return None
        now = dependency_bytes(dep)
        if now is None or hashlib.sha256(now).hexdigest() != digest:
            return None  # changed again meanwhile, or a module too large to be known by its bytes
        # No map when ``now`` does not tokenize or differs in code; the same tokens spell
        # the same names, so ``now`` can see its source only if the stored text could.
        lines = line_map(old, now)
        if lines is None or lines.introspects:
            return None
        maps.append(FileMap(dep, old, lines))
    return maps, now_states
