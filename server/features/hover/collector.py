"""The anchors of one result's hover, as they are collected: the file's text and AST
index, the result, ``span -> sections`` and which target claimed each span, and a
signature's state inputs indexed the ways attribute hovers look them up. Every kind
of anchor (``anchors``: targets, arguments, attributes, outputs; ``dims``: ``Dim``
declarations; ``submodules``: a submodule's ``class`` line) adds to an ``Anchors``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from exportlens.core.model.results import Diagnostic, FileResult, TargetResult
from exportlens.core.model.signature import InputSpec, Signature
from exportlens.core.source.sourcemap import ClassInfo, SourceIndex
from exportlens.server.features.hover import text as md
from exportlens.server.markup import Markup
from exportlens.server.positions import LineSpan, SourceSpans, split_lines


class Anchors:
    """Collects ``span -> sections`` for every target of one result."""

    def __init__(self, path: str, source: str, result: FileResult, markup: Markup) -> None:
        self.path = path
        self.markup = markup  # the client's: every section is written in it
        self.text = SourceSpans(split_lines(source))
        self.source = _parse(source, path)
        self.result = result
        # span -> its sections (insertion-ordered, deduplicated): one per target view.
        self.sections: dict[LineSpan, dict[str, None]] = {}
        # (target name, span): something target-specific already covers the span.
        self.claimed: set[tuple[str, LineSpan]] = set()
        self.classes = sorted(self.source.classes.values(), key=lambda c: c.first_line)
        self._globals_taken = False

    def add(self, spans: Iterable[LineSpan], target: str, text: str) -> None:
        for span in spans:
            self.sections.setdefault(span, {})[text] = None
            self.claimed.add((target, span))

    def target_text(self, target: TargetResult) -> str:
        return md.target_hover(self.markup, target, self._errors_of(target), self.path)

    def add_target_line(self, target: TargetResult) -> None:
        if target.line <= 0:
            return  # a model module's view of a target whose class is elsewhere
        text = self.target_text(target)
        lines = [target.line]
        owner = self._defined_at(target.line)
        if owner is not None:  # decorators belong to the declaration
            lines = list(range(owner[0], target.line + 1))
        model = self._model_line(target)
        if model is not None and model not in lines:
            lines.append(model)
        for line in lines:
            self.add(self.text.whole_line(line), target.name, text)

    def _model_line(self, target: TargetResult) -> int | None:
        """The ``model = X()`` line of the file's globals-form target: the target's line
        is its class's ``class`` line when the class is in the file (else that line)."""
        found = self.source.global_assignments
        model = found.get("model")
        if model is None or "example_args" not in found or self._globals_taken:
            return None
        if target.line == model.line or any(c.where.line == target.line and c.qualname.rsplit(".", 1)[-1] == target.name for c in self.classes):
            self._globals_taken = True  # one globals target per file
            return model.line
        return None

    def _errors_of(self, target: TargetResult) -> list[Diagnostic]:
        errors = [d for d in self.result.diagnostics if d.severity == "error"]
        own = [d for d in errors if d.target == target.name]
        if own or target.status == "ok":
            return own
        return [d for d in errors if d.target is None]  # an import error fails every target

    def _defined_at(self, line: int) -> tuple[int, int] | None:
        """(first line with decorators, def line) of the class or function defined at ``line``."""
        for c in self.classes:
            if c.where.line == line:
                return c.first_line, line
        for f in self.source.all_functions():
            if f.where.line == line:
                return f.first_line, line
        return None

    def innermost_class(self, line: int) -> ClassInfo | None:
        best: ClassInfo | None = None
        for c in self.classes:
            if c.first_line <= line <= c.last_line:
                best = c  # sorted by first line: a later match is nested deeper
        return best


def _parse(source: str, path: str) -> SourceIndex:
    try:
        return SourceIndex.build(source, path)
    except Exception:  # RecursionError on absurd nesting, ...: hover what the result says
        return SourceIndex(path=path, text=source)


class StateInputs:
    """A signature's state inputs (parameters, buffers, constants, unknown kinds with a
    target) indexed the ways attribute hovers look them up."""

    def __init__(self, sig: Signature) -> None:
        state = [s for s in sig.inputs if s.kind != "USER_INPUT" and (s.target is not None or s.source is not None)]
        self.order = {id(s): i for i, s in enumerate(state)}
        # "blocks.0" -> every spec at or below that module path.
        self.by_path: dict[str, list[InputSpec]] = {}
        # (line, column) of the definition a spec comes from -> those specs.
        self.by_source: dict[tuple[int, int], list[InputSpec]] = {}
        # A module name on the path below the root, above the leaf -> specs under it.
        self.by_inner: dict[str, list[InputSpec]] = {}
        for s in state:
            if s.source is not None:
                self.by_source.setdefault((s.source.line, s.source.column), []).append(s)
            if s.target is None:
                continue
            parts = s.target.split(".")
            for k in range(1, len(parts) + 1):
                self.by_path.setdefault(".".join(parts[:k]), []).append(s)
            for name in dict.fromkeys(parts[1:-1]):
                self.by_inner.setdefault(name, []).append(s)


class TargetView(Protocol):
    """What one exported target says about the places in the file, as the submodule
    anchors read it (``anchors._TargetView`` is one)."""

    @property
    def b(self) -> Anchors: ...
    @property
    def m(self) -> Markup: ...
    @property
    def target(self) -> TargetResult: ...
    @property
    def sig(self) -> Signature: ...
    @property
    def name(self) -> str: ...
    @property
    def state(self) -> StateInputs: ...

    def prefixes(self, c: ClassInfo) -> set[str]: ...
