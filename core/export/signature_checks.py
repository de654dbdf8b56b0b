"""What a finished export says to the user beyond pass or fail: the mutations in its
signature, inputs and outputs the schema cannot classify, and tensor attributes torch
warned about. Torch-free, so the rules are tested as tables (the failure side is
:mod:`exportlens.core.export.analyze`)."""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from exportlens.core.model.results import Diagnostic
from exportlens.core.model.signature import INPUT_KINDS, OUTPUT_KINDS, Signature, SourceLine
from exportlens.core.source.sourcemap import SourceIndex

_MUTATION_CODES = {
    "BUFFER_MUTATION": ("mutation/buffer", "the program mutates buffer `{t}`: it becomes a `BUFFER_MUTATION` output `{n}`, copied back after each call"),
    "USER_INPUT_MUTATION": ("mutation/user-input", "the program mutates its input `{t}` in place: it becomes a `USER_INPUT_MUTATION` output `{n}`"),
    "PARAMETER_MUTATION": ("mutation/parameter", "the program mutates parameter `{t}`: it becomes a `PARAMETER_MUTATION` output `{n}`"),
}


_MUTATION_MANY = {
    "BUFFER_MUTATION": "the program mutates buffers {ts}: each becomes a `BUFFER_MUTATION` output, copied back after each call",
    "USER_INPUT_MUTATION": "the program mutates its inputs {ts} in place: each becomes a `USER_INPUT_MUTATION` output",
    "PARAMETER_MUTATION": "the program mutates parameters {ts}: each becomes a `PARAMETER_MUTATION` output",
}


def mutation_diagnostics(sig: Signature, target: str, fallback: SourceLine) -> list[Diagnostic]:
    """One diagnostic per line of code and kind, naming every mutation it makes: a
    block used twice mutates ``blocks.0.steps`` and ``blocks.1.steps`` at one line."""
    groups: dict[tuple[str, str | None, int, int], tuple[SourceLine, list[tuple[str, str]]]] = {}
    for spec in sig.outputs:
        if spec.kind in _MUTATION_CODES:
            where = spec.source or fallback
            groups.setdefault((spec.kind, where.path, where.line, where.column), (where, []))[1].append((str(spec.target), spec.arg.name))
    out = []
    for (kind, *_), (where, mutated) in groups.items():
        code, text = _MUTATION_CODES[kind]
        if len(mutated) == 1:
            message = text.format(t=mutated[0][0], n=mutated[0][1])
        else:
            named = [f"`{t}` (output `{n}`)" for t, n in mutated]
            message = _MUTATION_MANY[kind].format(ts=", ".join(named[:-1]) + " and " + named[-1])
        out.append(Diagnostic.at(code, message, where, target))
    return out


def signature_diagnostics(
    sig: Signature,
    *,
    placeholders: Sequence[str],
    graph_outputs: Sequence[str],
    parameters: Iterable[str],
    buffers: Iterable[str],
    constants: Iterable[str],
    target: str,
    fallback: SourceLine,
) -> list[Diagnostic]:
    """``unknown-input-kind``/``unknown-output-kind``: what the schema cannot classify.

    A kind it does not know, a graph placeholder (output) no spec covers, a spec
    whose target names no parameter, buffer or constant of the module.
    """
    params, bufs, consts = set(parameters), set(buffers), set(constants)
    state_by_kind = {"PARAMETER": params, "BUFFER": bufs, "CONSTANT_TENSOR": consts | bufs, "CUSTOM_OBJ": consts}
    out: list[Diagnostic] = []

    def add(code: str, message: str, where: SourceLine | None) -> None:
        out.append(Diagnostic.at(code, message, where or fallback, target))

    covered = set()
    user_inputs = set()
    for spec in sig.inputs:
        covered.add(spec.arg.name)
        if spec.kind not in INPUT_KINDS:
            add("unknown-input-kind", f"input `{spec.arg.name}` has kind `{spec.kind}`, which this version of exportlens does not know", spec.source)
            continue
        if spec.kind == "USER_INPUT":
            user_inputs.add(spec.arg.name)
        names = state_by_kind.get(spec.kind)
        if names is not None and spec.target not in names:
            add("unknown-input-kind", f"input `{spec.arg.name}` ({spec.kind}) names target `{spec.target}`, which is no {spec.kind.lower().replace('_', ' ')} of the module", spec.source)
    for name in placeholders:
        if name not in covered:
            add("unknown-input-kind", f"graph input `{name}` is covered by no input spec: its kind is unknown", None)

    out_covered = set()
    for o in sig.outputs:
        out_covered.add(o.arg.name)
        if o.kind not in OUTPUT_KINDS:
            add("unknown-output-kind", f"output `{o.arg.name}` has kind `{o.kind}`, which this version of exportlens does not know", o.source)
            continue
        expected = {"BUFFER_MUTATION": bufs, "PARAMETER_MUTATION": params, "GRADIENT_TO_PARAMETER": params, "USER_INPUT_MUTATION": user_inputs}.get(o.kind)
        if expected is not None and o.target not in expected:
            add("unknown-output-kind", f"output `{o.arg.name}` ({o.kind}) names target `{o.target}`, which names nothing it could mutate", o.source)
    for name in graph_outputs:
        if name not in out_covered:
            add("unknown-output-kind", f"graph output `{name}` is covered by no output spec: its kind is unknown", None)
    return out


_ATTR_WARNING = re.compile(r"The tensor attributes? (.+?) (?:was|were) assigned during export")
_SELF_ATTR = re.compile(r"self\.([A-Za-z_]\w*)")


def tensor_attribute_diagnostics(warnings: Iterable[str], index: SourceIndex, target: str, fallback: SourceLine) -> list[Diagnostic]:
    """torch only warns when ``forward`` assigns a tensor attribute that is not a
    buffer, and silently drops the update; report it at each assignment."""
    out: list[Diagnostic] = []
    seen: set[str] = set()
    for text in warnings:
        m = _ATTR_WARNING.search(text)
        if not m:
            continue
        for attr_path in m.group(1).split(", "):
            am = _SELF_ATTR.search(attr_path)
            if not am:
                continue
            attr = am.group(1).split(".")[-1] if "." in am.group(1) else am.group(1)
            if attr in seen:
                continue
            seen.add(attr)
            message = (
                f"`self.{attr}` is a tensor attribute assigned in `forward` but not a registered buffer: "
                "export keeps its first value and silently drops this update. "
                f"Register it with `self.register_buffer({attr!r}, ...)` and update it in place."
            )
            places = index.attribute_assignments(attr) or [fallback]
            for where in places:
                out.append(Diagnostic.at("banned-mutation/tensor-attribute", message, where, target, level="warning"))
    return out
