"""Tensor attributes assigned during export, resolved against the live module.

torch warns "The tensor attributes self.block.attn.att, self.rnn._flat_weights[0]
were assigned during export" and silently keeps the first value. The path is
torch's, from the exported root module; this module walks it to the submodule
that owns the attribute and asks whose code assigned it:

* the owner's class (or the first of its bases) defined in one of the user's files
  that assigns ``self.<attr> = ...`` outside ``__init__``: the diagnostic goes at
  those assignments, in the module where the class is, naming the full path and
  the class whose ``__init__`` should register the buffer;
* no class of the user's in the owner's MRO: torch's or an installed library's
  own bookkeeping (``nn.GRU``/``nn.LSTM`` reassign ``_flat_weights`` on every call),
  which the user can neither fix nor is hurt by; no diagnostic.

A path that does not resolve (a module that changed under export) falls back to
the file-level rule in ``signature_checks.tensor_attribute_diagnostics``. Runs in the job
process, next to the module.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from typing import Any

from exportlens.core.export import signature_checks
from exportlens.core.model.results import Diagnostic
from exportlens.core.model.signature import SourceLine
from exportlens.core.source.project import UserSources

_WARNING = re.compile(r"The tensor attributes? (.+?) (?:was|were) assigned during export")
_PART = re.compile(r"([A-Za-z_]\w*)((?:\[\d+\])*)")
MISSING = object()


def _paths(warnings: Iterable[str]) -> list[str]:
    """Each attribute path torch names, without ``self.``, in order, once."""
    out: dict[str, None] = {}
    for text in warnings:
        m = _WARNING.search(text)
        if m:
            out.update((p.strip().removeprefix("self."), None) for p in m.group(1).split(", ") if p.strip().startswith("self."))
    return list(out)


def resolve(root: Any, parts: list[str]) -> Any:
    """The object at ``parts`` (``h[0]`` or ``h.0`` both index a ModuleList), or MISSING."""
    obj = root
    for part in parts:
        m = _PART.fullmatch(part)
        try:
            if m is None:
                obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
                continue
            obj = getattr(obj, m.group(1))
            for index in re.findall(r"\[(\d+)\]", m.group(2)):
                obj = obj[int(index)]
        except Exception:  # noqa: BLE001 - user __getattr__ may raise anything
            return MISSING
    return obj


def assigning_class(owner: Any, attr: str, sources: UserSources) -> tuple[str, list[SourceLine]] | None:
    """The user's class in ``owner``'s MRO that assigns ``attr`` (its late assignments,
    or its ``class`` line when none is visible), or None: not the user's code."""
    first: tuple[str, list[SourceLine]] | None = None
    for cls in type(owner).__mro__:
        try:
            file = inspect.getsourcefile(cls)
        except (TypeError, OSError):
            continue
        if not file or not sources.is_user(file):
            continue
        info = sources.index(file).classes.get(cls.__qualname__.replace(".<locals>", ""))
        if info is None:
            continue
        if info.late_assignments.get(attr):
            return cls.__name__, list(info.late_assignments[attr])
        first = first or (cls.__name__, [info.where])
    return first


def python_path(path: str) -> str:
    """torch's dotted path of an attribute as Python reads it: ``blocks.0.cache`` ->
    ``self.blocks[0].cache`` (a ModuleList's items are indexed, not attributes)."""
    out = "self"
    for part in path.split("."):
        m = _PART.fullmatch(part)
        if part.isdigit():
            out += f"[{part}]"
        elif m is not None:
            out += f".{part}"
        else:
            out += f"[{part!r}]"  # a ModuleDict key that is no identifier
    return out


def natural(path: str) -> list[tuple[int, int | str]]:
    """``blocks.2`` before ``blocks.10``."""
    return [(0, int(p)) if p.isdigit() else (1, p) for p in path.split(".")]


def listed(paths: list[str]) -> str:
    """```a`, `b` and `c``` (Python paths)."""
    shown = [f"`{python_path(p)}`" for p in paths]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def tensor_attribute_diagnostics(
    warnings: list[str], module: Any, sources: UserSources, target: str, fallback: SourceLine, skip: frozenset[str] = frozenset()
) -> list[Diagnostic]:
    """One diagnostic per place the user's code assigns a tensor attribute that export
    drops, naming every instance that runs it (a block used twice: ``self.blocks[0].cache``
    and ``self.blocks[1].cache``). ``skip``: torch paths already reported otherwise (an
    in-place update export failed on: the error says it, no warning contradicts it)."""
    unresolved: list[str] = []
    # where -> (the class to register it in, the attribute, every instance's path)
    places: dict[tuple[str | None, int, int], tuple[SourceLine, str, str, list[str]]] = {}
    for path in _paths(warnings):
        if path in skip:
            continue
        parts = path.split(".")
        leaf = _PART.match(parts[-1])
        attr = leaf.group(1) if leaf else parts[-1]
        owner = resolve(module, parts[:-1])
        if owner is MISSING:
            unresolved.append(path)
            continue
        found = assigning_class(owner, attr, sources)
        if found is None:
            continue  # torch's or a library's own attribute: not the user's to fix
        cls, wheres = found
        for where in wheres:  # every instance (h.0, h.1) runs the same line of code
            places.setdefault((where.path, where.line, where.column), (where, cls, attr, []))[3].append(path)
    out: list[Diagnostic] = []
    for where, cls, attr, paths in places.values():
        one = len(paths) == 1
        what = f"{listed(sorted(paths, key=natural))} {'is a tensor attribute' if one else 'are tensor attributes'}"
        message = (
            f"{what} assigned during export but not {'a registered buffer' if one else 'registered buffers'}: "
            "export keeps its first value and silently drops this update. "
            f"Register it in `{cls}.__init__` with `self.register_buffer({attr!r}, ...)` and update it in place."
        )
        out.append(Diagnostic.at("banned-mutation/tensor-attribute", message, where, target, level="warning"))
    if unresolved:
        text = "The tensor attributes " + ", ".join("self." + p for p in unresolved) + " were assigned during export"
        out += signature_checks.tensor_attribute_diagnostics([text], sources.main, target, fallback)
    return out
