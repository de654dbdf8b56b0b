"""A plain tensor attribute that ``forward`` updates in place: a KV cache kept as
``self.cache_k = torch.zeros(...)`` and written by ``self.cache_k[:bsz, pos] = xk``,
as Meta's reference Llama does.

Export keeps a tensor attribute that is no buffer as a constant, and fails on the
first in-place update it finds: ``Constant layers.0.attention.cache_k is mutated in
the forward method. Pls register it as buffer`` -- naming one instance of one
attribute, with no line. The eager run after a failed export (``mutations``)
watches every in-place update of a plain tensor attribute; this module turns them
into one error per line of code that writes one (naming every instance it writes:
both layers' ``cache_k``), at that line, in the words of the register-buffer quick
fix (``core/fixes/buffers``). Runs in the job process; imports no torch itself.
"""

from __future__ import annotations

import re
from typing import Any

from exportlens.core.export.attributes import MISSING, assigning_class, listed, natural, resolve
from exportlens.core.export.mutations import Mutation
from exportlens.core.model.results import Diagnostic
from exportlens.core.model.signature import SourceLine
from exportlens.core.source.project import UserSources

_CONSTANT_MUTATED = re.compile(r"Constant (\S+) is mutated in the forward method")
CODE = "banned-mutation/tensor-attribute"

_HOW = {"__setitem__": "assigns into it (`self.{a}[...] = ...`)"}


def failed_on_constant(message: str) -> bool:
    """Whether export failed because ``forward`` updated a constant in place."""
    return _CONSTANT_MUTATED.search(message) is not None


def diagnostics(mutations: list[Mutation], module: Any, sources: UserSources, target: str) -> list[Diagnostic]:
    """One error per line that updates a plain tensor attribute in place."""
    groups: dict[tuple[str, int], tuple[SourceLine, str, str, list[str]]] = {}
    for m in mutations:
        if m.kind != "tensor-attribute" or m.frame is None:
            continue
        parts = m.name.split(".")
        attr = parts[-1]
        owner = resolve(module, parts[:-1])
        found = assigning_class(owner, attr, sources) if owner is not MISSING else None
        if found is None:
            continue  # torch's or a library's own tensor: not the user's to fix
        where = sources.statement(m.frame)
        key = (where.path or sources.main_path, where.line)
        paths = groups.setdefault(key, (where, found[0], m.op, []))[3]
        if m.name not in paths:
            paths.append(m.name)
    out = []
    for where, cls, op, paths in groups.values():
        attr = paths[0].rsplit(".", 1)[-1]
        one = len(paths) == 1
        how = _HOW.get(op, f"calls `.{op}(...)` on it" if op.endswith("_") else f"updates it with `{op}`").format(a=attr)
        message = (
            f"{listed(sorted(paths, key=natural))} {'is a tensor attribute' if one else 'are tensor attributes'}, "
            f"not {'a registered buffer' if one else 'registered buffers'}, that `forward` updates in place: this line {how}. "
            f"Export keeps such a tensor as a constant and fails on the update (torch says \"Constant {paths[0]} is mutated in the forward method\" for the first it meets). "
            f"Register it in `{cls}.__init__` with `self.register_buffer({attr!r}, ..., persistent=False)`: export then records each update as a buffer mutation."
        )
        out.append(Diagnostic.at(CODE, message, where, target, level="error"))
    return out


_REGISTER = re.compile(r"Register it in `(\w+)\.__init__` with `self\.register_buffer\('(\w+)'")


def without_contradictions(found: list[Diagnostic], warnings: list[Diagnostic]) -> list[Diagnostic]:
    """``warnings`` (tensor attributes whose assignment export drops) without those
    about an attribute ``found`` reports as an error (export failed on its in-place
    update): "silently drops this update" would contradict the failure."""
    failed = {m.groups() for d in found if d.code == CODE and d.severity == "error" for m in [_REGISTER.search(d.message)] if m}
    return [w for w in warnings if not ((m := _REGISTER.search(w.message)) and m.groups() in failed)]
