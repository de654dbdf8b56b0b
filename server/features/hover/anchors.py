"""What each place of a model file shows on hover, for every exported target.

The issue's table, read off a :class:`FileResult` and the file's AST index:

* a ``forward`` argument (in the ``def`` and its reads until it is rebound) -> its
  ``USER_INPUT`` specs and the ``USER_INPUT_MUTATION`` of it;
* ``self.<attr>`` in a class, the ``register_buffer("name")`` literal and the line
  defining it -> the ``PARAMETER``/``BUFFER``/``CONSTANT_TENSOR`` specs under that
  attribute (every instance: ``blocks.0.w``, ``blocks.1.w``) and their mutations;
* an in-place call's line -> the mutation output whose source is that call;
* a ``return`` of the exported ``forward`` -> its ``USER_OUTPUT`` specs;
* the target's own line (and its decorators), and the ``model = X()`` line of the
  globals form -> the whole signature, status, time, and for a failed target the
  error diagnostics;
* a submodule's ``class`` line -> its parameters and buffers under every instance
  path (:mod:`~exportlens.server.features.hover.submodules`);
* a ``Dim(...)`` declaration -> its range, torch's symbol and the inputs using it, or
  the line that specialised it (:mod:`~exportlens.server.features.hover.dims`).

Symbolic dims are shown by the user's ``Dim`` names (``Signature.dim_names``).

A class belongs to every target whose specs point into it, so a class exported by
two targets shows both. The result is overlapping anchors, ``span -> sections``;
:mod:`exportlens.server.features.hover.index` paints them into disjoint segments.
Spans are 0-based lines and UTF-16 code units (:class:`SourceSpans`).
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace

from exportlens.core.model.results import FileResult, TargetResult
from exportlens.core.model.signature import OUTPUT_KINDS, InputSpec, OutputSpec, Signature, SourceLine
from exportlens.core.source.sourcemap import ClassInfo, FunctionInfo, param_for_placeholder
from exportlens.server.features.hover import dims, submodules
from exportlens.server.features.hover import text as md
from exportlens.server.features.hover.collector import Anchors, StateInputs
from exportlens.server.markup import Markup
from exportlens.server.positions import LineSpan

log = logging.getLogger(__name__)

# Output kinds that name a state input by its target, and those that name a user input.
_STATE_OUTPUTS = {"BUFFER_MUTATION", "PARAMETER_MUTATION", "GRADIENT_TO_PARAMETER"}
_USER_INPUT_OUTPUTS = {"USER_INPUT_MUTATION", "GRADIENT_TO_USER_INPUT"}
# Outputs that are what forward returns (shown on `return`, not as mutations).
_RESULT_OUTPUTS = {"USER_OUTPUT", "LOSS_OUTPUT"}


def _same_start(a: SourceLine | None, b: SourceLine | None) -> bool:
    return a is not None and b is not None and a.line == b.line and a.column == b.column


def _key(s: SourceLine) -> tuple[int, int, int | None, int | None]:
    return (s.line, s.column, s.end_line, s.end_column)


def collect(path: str, source: str, result: FileResult, markup: Markup) -> Anchors:
    """Every anchor of ``result``'s targets in the file at ``path`` (its text ``source``)."""
    anchors = Anchors(path, source, result, markup)
    for target in anchors.result.targets:
        try:
            anchors.add_target_line(target)
            if target.signature is not None:
                _TargetView(anchors, target, target.signature).build()
        except Exception:  # one odd target must not cost the others their hovers
            log.exception("hover index: target %s of %s skipped", target.name, anchors.path)
    try:
        dims.add_declarations(anchors)
    except Exception:
        log.exception("hover index: the Dim declarations of %s skipped", anchors.path)
    return anchors


class _TargetView:
    """What one exported target says about the places in the file."""

    def __init__(self, builder: Anchors, target: TargetResult, sig: Signature) -> None:
        self.b = builder
        self.m = builder.markup
        self.target = target
        # Only the lines in this file anchor hovers here: a spec defined at line 10 of
        # a local module is not about this file's line 10 (the target's own hover
        # names it there, ``blocks.py:10``).
        self.sig = _lines_in(sig, builder.path)
        self.name = target.name
        self.index = builder.source
        self.state = StateInputs(sig)

    def build(self) -> None:
        forwards = self._root_forwards()
        roots = {id(c) for c in (self._class_of(f) for f in forwards) if c is not None}
        declared = next((c for c in self.b.classes if c.where.line == self.target.line), None)
        if declared is not None:
            roots.add(id(declared))
        for c in self.b.classes:
            if id(c) in roots and c.where.line != self.target.line:
                # A factory's module class: its `class` line is the target's too.
                self.b.add(self.b.text.whole_line(c.where.line), self.name, self.b.target_text(self.target))
        for f in forwards:
            self._forward_arguments(f)
            self._returns(f)
        for c in self._owned_classes(declared):
            self._attributes(c, is_root=id(c) in roots)
        submodules.add_class_lines(self, roots)
        self._mutations()
        self._leftovers()


    def _specs(self) -> list[InputSpec | OutputSpec]:
        return [*self.sig.inputs, *self.sig.outputs]

    def _spec_lines(self) -> set[int]:
        return {s.source.line for s in self._specs() if s.source is not None}

    def _owned_classes(self, declared: ClassInfo | None) -> list[ClassInfo]:
        owned: dict[int, ClassInfo] = {}
        for line in sorted(self._spec_lines()):
            c = self.b.innermost_class(line)
            if c is not None:
                owned[id(c)] = c
        if declared is not None:
            owned[id(declared)] = declared
        return list(owned.values())

    def _class_of(self, f: FunctionInfo) -> ClassInfo | None:
        return next((c for c in self.b.classes if any(m is f for m in c.methods.values())), None)

    def _user_inputs(self) -> list[InputSpec]:
        return [s for s in self.sig.inputs if s.kind == "USER_INPUT"]

    def _root_forwards(self) -> list[FunctionInfo]:
        """The exported ``forward``: where user inputs' parameters and outputs' returns are."""
        found: dict[int, FunctionInfo] = {}
        starts = {(s.source.line, s.source.column) for s in self._user_inputs() if s.source is not None}
        for f in self.index.all_functions():
            if any((p.line, p.column) in starts for p in f.params.values()):
                found[id(f)] = f
        for s in self.sig.outputs:
            if s.kind in _RESULT_OUTPUTS and s.source is not None:
                owner = self.index.enclosing_function(s.source.line)
                if owner is not None and any(_same_start(r, s.source) for r in owner.returns):
                    found[id(owner)] = owner
        if not found:  # no lines at all: the forward of the target's own class
            declared = next((c for c in self.b.classes if c.where.line == self.target.line), None)
            if declared is not None and "forward" in declared.methods:
                found[0] = declared.methods["forward"]
        return list(found.values())


    def _forward_arguments(self, f: FunctionInfo) -> None:
        users = self._user_inputs()
        params = list(f.params.items())[1:] if self._class_of(f) is not None else list(f.params.items())
        for pname, where in params:
            specs = [s for s in users if _same_start(s.source, where)]
            if not specs:  # no source recorded: torch names the placeholder after the parameter
                specs = [s for s in users if s.source is None and param_for_placeholder(s.arg.name, [p for p, _ in params]) == pname]
            if not specs:
                continue
            names = {s.arg.name for s in specs}
            mutations = [o for o in self.sig.outputs if _names_user_input(o) and o.target in names]
            text = md.section(self.m, f"{self.m.bold(pname)} · forward argument · {self.m.code(self.name)}", [*specs, *mutations], self.sig.ranges, names=self.sig.dim_names)
            spans = self.b.text.word(where, pname) + self.b.text.spans(where)
            limit = f.rebound_at.get(pname)
            for use in f.name_uses.get(pname, []):
                if limit is None or (use.line, use.column) < limit:
                    spans += self.b.text.spans(use)
            self.b.add(spans, self.name, text)


    def _returns(self, f: FunctionInfo) -> None:
        results = [o for o in self.sig.outputs if o.kind in _RESULT_OUTPUTS or o.kind not in OUTPUT_KINDS and o.target is None]
        for ret in f.returns:
            mine = [o for o in results if _same_start(o.source, ret)]
            title = f"{self.m.bold('return')} · {self.m.code(self.name)}"
            if mine:
                text = md.section(self.m, title, mine, self.sig.ranges, names=self.sig.dim_names)
            else:
                note = f"Export did not trace this {self.m.code('return')}; the program's outputs:"
                text = md.section(self.m, title, results, self.sig.ranges, note, names=self.sig.dim_names)
            self.b.add(self.b.text.spans(ret), self.name, text)


    def prefixes(self, c: ClassInfo) -> set[str]:
        """Where instances of ``c`` sit in the root module (``blocks.0.``), read off the
        specs whose source is one of ``c``'s attribute definitions."""
        out: set[str] = set()
        for attr, where in c.attributes.items():
            for s in self.state.by_source.get((where.line, where.column), []):
                parts = (s.target or "").split(".")
                if attr in parts:
                    k = len(parts) - 1 - parts[::-1].index(attr)
                    out.add("".join(p + "." for p in parts[:k]))
        return out

    def _attributes(self, c: ClassInfo, *, is_root: bool) -> None:
        prefixes = self.prefixes(c) | ({""} if is_root else set())
        names = dict.fromkeys([*c.attributes, *c.self_uses, *c.registered_names])
        for attr in names:
            specs = self._attribute_specs(c, attr, prefixes)
            if not specs:
                continue
            targets = {s.target for s in specs if s.target is not None}
            mutations = [o for o in self.sig.outputs if _names_state(o) and o.target in targets]
            text = md.section(self.m, f"{self.m.bold(f'self.{attr}')} · {self.m.code(self.name)}", [*specs, *mutations], self.sig.ranges, names=self.sig.dim_names)
            spans: list[LineSpan] = []
            for use in c.self_uses.get(attr, []):
                spans += self.b.text.spans(use)
            for literal in c.registered_names.get(attr, []):
                spans += self.b.text.spans(literal)
            spans += self.b.text.spans(c.attributes.get(attr))
            self.b.add(spans, self.name, text)

    def _attribute_specs(self, c: ClassInfo, attr: str, prefixes: set[str]) -> list[InputSpec]:
        where = c.attributes.get(attr)
        found: dict[int, InputSpec] = {}
        if where is not None:
            found.update((id(s), s) for s in self.state.by_source.get((where.line, where.column), []))
        for prefix in prefixes:
            found.update((id(s), s) for s in self.state.by_path.get(prefix + attr, []))
        if found or prefixes:
            return sorted(found.values(), key=lambda s: self.state.order[id(s)])
        # Nothing places this class in the module tree (its specs come from a deeper
        # class's definitions): any instance path that passes through `attr`.
        return self.state.by_inner.get(attr, [])


    def _mutations(self) -> None:
        groups: dict[tuple[int, int, int | None, int | None], list[OutputSpec]] = {}
        for o in self.sig.outputs:
            if o.source is not None and not (o.kind in _RESULT_OUTPUTS or (o.kind not in OUTPUT_KINDS and o.target is None)):
                groups.setdefault(_key(o.source), []).append(o)
        for outs in groups.values():
            where = outs[0].source
            assert where is not None
            targets = {o.target for o in outs}
            mutated = [
                s for s in self.sig.inputs
                if (s.kind == "USER_INPUT" and s.arg.name in targets) or (s.kind != "USER_INPUT" and s.target in targets)
            ]
            text = md.section(self.m, f"{self.m.bold('in-place update')} · {self.m.code(self.name)}", [*outs, *mutated], self.sig.ranges, names=self.sig.dim_names)
            self.b.add(self.b.text.spans(where) + self.b.text.whole_line(where.line), self.name, text)


    def _leftovers(self) -> None:
        """Specs whose line no anchor above covers (broken source, unusual code): the
        spec's own range shows the specs that share it."""
        groups: dict[tuple[int, int, int | None, int | None], list[InputSpec | OutputSpec]] = {}
        for s in self._specs():
            if s.source is not None:
                groups.setdefault(_key(s.source), []).append(s)
        for specs in groups.values():
            where = specs[0].source
            assert where is not None
            spans = [sp for sp in self.b.text.spans(where) if (self.name, sp) not in self.b.claimed]
            if spans:
                text = md.section(self.m, f"{self.m.bold(f'line {where.line}')} · {self.m.code(self.name)}", specs, self.sig.ranges, names=self.sig.dim_names)
                self.b.add(spans, self.name, text)


def _lines_in(sig: Signature, path: str) -> Signature:
    """``sig`` with the source lines of other files than ``path`` left out."""
    real = os.path.realpath(path)

    def here(where: SourceLine | None) -> SourceLine | None:
        return where if where is None or where.path is None or os.path.realpath(where.path) == real else None

    return replace(
        sig,
        inputs=tuple(replace(s, source=here(s.source)) for s in sig.inputs),
        outputs=tuple(replace(s, source=here(s.source)) for s in sig.outputs),
    )


def _names_user_input(o: OutputSpec) -> bool:
    return o.kind in _USER_INPUT_OUTPUTS or (o.kind not in OUTPUT_KINDS and o.target is not None)


def _names_state(o: OutputSpec) -> bool:
    return o.kind in _STATE_OUTPUTS or (o.kind not in OUTPUT_KINDS and o.target is not None)
