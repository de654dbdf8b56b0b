"""Hover on a submodule's ``class`` line: its parameters and buffers as the exported
root module sees them, under every path an instance of it sits at.

``class Block(nn.Module)`` used as ``self.block = Block()`` and ``self.extra = Block()``
shows ``block.attn.q.weight``, ``extra.attn.q.weight``, ... (kind, dtype and shape,
``persistent``) for each target that uses it: what ``print(ep.graph_signature)``
says about the class, where the user reads the class.

Which module paths are instances of the class comes from two places, joined:

* torch's own record: each traced node's ``nn_module_stack`` names the module paths
  it ran in and their classes (``"block": "pkg.model.Block"``), kept in the program
  bytes and read by :func:`exportlens.core.serde.modules.module_types`;
* the source, for an instance whose ``forward`` never runs (only its parameters are
  read, so no node names it) or a result without a program: the specs whose line is
  one of the class's own attribute definitions sit under its instances' paths.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from exportlens.core.model.signature import InputSpec, OutputSpec
from exportlens.core.serde.codec import SchemaError
from exportlens.core.serde.modules import module_types
from exportlens.core.source.sourcemap import ClassInfo
from exportlens.server.features.hover import text as md

if TYPE_CHECKING:
    from exportlens.server.features.hover.collector import TargetView

log = logging.getLogger(__name__)

_STATE_OUTPUTS = {"BUFFER_MUTATION", "PARAMETER_MUTATION"}


def _program_modules(program: bytes) -> dict[str, str]:
    if not program:
        return {}
    try:
        return module_types(program)
    except Exception as e:  # a damaged program still leaves the source's answer, and the other hovers
        log.warning("hover: the program's module records could not be read (%s)", e if isinstance(e, SchemaError) else type(e).__name__)
        return {}


def _module_names(path: str) -> set[str]:
    """The last part of the dotted names a file is imported as: its stem, and its
    package's folder for an ``__init__.py``."""
    stem = os.path.splitext(os.path.basename(path))[0]
    return {stem, os.path.basename(os.path.dirname(path))} if stem == "__init__" else {stem}


def is_class(type_name: str, c: ClassInfo, path: str) -> bool:
    """Whether torch's ``pkg.model.Block`` is the class ``c`` of the file ``path``: the
    qualified name ends the same, in a module named after the file (the declaring
    file runs under its own module name; ``__main__`` when run as a script)."""
    module, dot, qualname = type_name.rpartition("." + c.qualname)
    if not dot or qualname:
        return False
    last = module.rpartition(".")[2]
    return last in _module_names(path) or last == "__main__"


def instance_paths(view: TargetView, c: ClassInfo, modules: dict[str, str]) -> list[str]:
    """Where instances of ``c`` sit in the target's root module (``["block", "extra"]``),
    the root itself excluded, in the order torch met them."""
    paths = dict.fromkeys(p for p, t in modules.items() if p and is_class(t, c, view.b.path))
    for prefix in sorted(view.prefixes(c)):
        if prefix:
            paths.setdefault(prefix.rstrip("."), None)
    return list(paths)


def add_class_lines(view: TargetView, roots: set[int]) -> None:
    """Each class of the file that the target holds as a submodule: its ``class`` line
    shows its parameters and buffers under every instance path."""
    candidates = [c for c in view.b.classes if id(c) not in roots]
    if not candidates:
        return
    modules = _program_modules(view.target.program)
    for c in candidates:
        paths = instance_paths(view, c, modules)
        if not paths:
            continue
        found: dict[int, InputSpec] = {}
        for p in paths:  # instance by instance, each in torch's order
            under = [s for s in view.state.by_path.get(p, []) if s.target is not None and s.target.startswith(p + ".")]
            found.update((id(s), s) for s in sorted(under, key=lambda s: view.state.order[id(s)]))
        specs = list(found.values())
        fqns = {s.target for s in specs}
        mutations: list[OutputSpec] = [o for o in view.sig.outputs if o.kind in _STATE_OUTPUTS and o.target in fqns]
        m = view.m
        where = ", ".join(m.code(p) for p in paths)
        title = f"{m.bold('class ' + c.qualname.rsplit('.', 1)[-1])} · submodule of {m.code(view.name)} at {where}"
        note = "" if specs else "No parameters or buffers."
        text = md.section(m, title, [*specs, *mutations], view.sig.ranges, note, names=view.sig.dim_names)
        view.b.add(view.b.text.whole_line(c.where.line), view.name, text)
