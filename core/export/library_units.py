"""The library units a job's result depends on: the library part of its cache key. Torch-free.

Which files: the modules the user's code imported (``libraries.NAMED``: the watch, and
the classes of the built modules), then every module those import in turn, as far as
the import statements executed in this process and in the worker before it tell
(``libraries.EDGES``, recorded for the worker's whole life, so a module preloaded
before the job still says what it imported: the same set whether or not it was
preloaded), with each module's parent packages; not torch's, exportlens's, the
standard library's nor the project's own (keyed elsewhere). Each file is keyed by its
*unit*: the RECORD of the installed distribution that lists it (one hash for all of
transformers' modules), else the file itself, by its bytes (PYTHONPATH folders,
editable installs, namespace packages): ``core/disk/states.unit_state``.

What the worker does once, so that each job does not (``learn``, after the worker
took what it holds: ``libraries.hold``): it resolves every module it holds, takes
each unit's state (memoized by the file's metadata: a job then checks it with a
stat), and walks from each top-level library it holds (``_WALKS``). A job adds such a
walk whole and walks on only from what changed since: the import statements of its
modules that named something new (``libraries.GROWN``: a function of transformers'
that imports when a model is built), and the names it met that held no module then
and hold one now. A tiny BERT's job reaches ~1,000 transformers files through
~15,000 edges: walked and hashed anew, that was ~24 ms of every save; and every
object a forked job touches costs it a copied page, so the job reads the worker's
walks rather than re-checking each of their names.

A walk is used only while ``sys.modules`` lost no module since the worker took it
(its order tells what came since; a count tells a loss): a module taken out (a
preloaded library the project shadows, ``libraries.unshadow``) makes the job walk
everything itself. Not seen: a module the job put in place of another of the same
name without taking that one out first.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from exportlens.core.disk import states
from exportlens.core.disk.states import stat_state, unit_state
from exportlens.core.export import libraries
from exportlens.core.export.libraries import CHANGED, EDGES, KEYED_ELSEWHERE, imported_state


def depended_on(root: str | None) -> dict[str, str]:
    """Each library unit the job's result depends on -> its state as the job ran it:
    the distributions (their RECORD) and other module files reached from what the
    user's code imported; ``CHANGED`` for one whose file changed since it was
    imported (the worker's, or this job's)."""
    files = _reached(root)
    tables = _tables()
    units: dict[str, list[str]] = {}
    for real in files:
        units.setdefault(record_of(real, tables) or real, []).append(real)
    out: dict[str, str] = {}
    for unit, members in units.items():
        if any(_ran_state(real) == CHANGED for real in members):
            out[unit] = CHANGED
            continue
        state = unit_state(unit)
        if state is not None:
            out[unit] = state
            continue
        for real in members:  # a distribution without readable metadata: its files by their bytes
            state = unit_state(real) if real != unit else None
            if state is not None:
                out[real] = state
    return dict(sorted(out.items()))


# -- the walk -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Walk:
    """The walk from one top-level library, as the worker took it."""

    names: frozenset[str]  # the names it went through that held a module
    absent: frozenset[str]  # the names it met that held none (an attribute a fromlist named)
    files: frozenset[str]
    folders: frozenset[str]  # the folders of ``files``, each ending in os.sep


_WALKS: dict[str, _Walk] = {}
# ``len(sys.modules)`` and its last name when the walks were taken.
_TAKEN_COUNT = 0
_TAKEN_LAST: str | None = None


def _reached(root: str | None) -> set[str]:
    """Real files of the modules the user's code imported and of every module those
    import in turn, with each one's parent packages (see the module's docstring)."""
    added = _added()
    walks: list[_Walk] = []
    tried: set[str] = set()
    todo = list(libraries.NAMED)
    seen: set[str] = set()
    files: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or any(name in w.names for w in walks):
            continue
        top = name.partition(".")[0]
        if added is not None and top not in tried:
            tried.add(top)
            walk = _WALKS.get(top)
            if walk is not None and all(_outside_project(f, root) for f in walk.folders):
                walks.append(walk)
                files.update(walk.files)
                for importer in libraries.GROWN:
                    if importer in walk.names:
                        todo.extend(EDGES.get(importer, ()))
                todo.extend(n for n in added if n in walk.absent)
                if name in walk.names:
                    continue
        seen.add(name)
        todo.extend(_step(name, root, files))
    return files


def _step(name: str, root: str | None, files: set[str]) -> Iterable[str]:
    """One module of the walk: add its file to ``files``; the names it leads to."""
    module = sys.modules.get(name)
    if module is None or name.partition(".")[0] in KEYED_ELSEWHERE:
        return ()
    real, keep = _node(name, module)
    if not keep:
        return ()
    if real is not None:
        if not _outside_project(real, root):
            return ()
        files.add(real)
    # else a namespace package: no file of its own, its portions are its modules'
    parent = name.rpartition(".")[0]
    edges = EDGES.get(name, ())
    return (*edges, parent) if parent else edges


def _added() -> list[str] | None:
    """The names ``sys.modules`` gained since the worker took its walks; None when it
    lost one since, or no walk was taken."""
    if _TAKEN_LAST is None:
        return None
    gained = len(sys.modules) - _TAKEN_COUNT
    added: list[str] = []
    for name in reversed(sys.modules):  # a dict keeps its order: what came since is last
        if name is _TAKEN_LAST:
            break
        added.append(name)
        if len(added) > gained:
            return None
    return added if len(added) == gained else None


# Module name -> (the module, its real file, whether the walk goes through it: not
# the standard library's, exportlens's, built in nor frozen). Valid while
# ``sys.modules`` holds that module (the memo keeps it alive: another module of the
# name is never taken for it).
_NODES: dict[str, tuple[Any, str | None, bool]] = {}


def _node(name: str, module: Any) -> tuple[str | None, bool]:
    memo = _NODES.get(name)
    if memo is not None and memo[0] is module:
        return memo[1], memo[2]
    file = getattr(module, "__file__", None)
    real: str | None = None
    if isinstance(file, str):
        real = libraries.real_path(file)
        keep = not (libraries.is_stdlib(real) or real.startswith(libraries.OWN))
    else:  # a namespace package has a path and no file; a built-in module neither
        keep = getattr(module, "__path__", None) is not None
    _NODES[name] = (module, real, keep)
    return real, keep


def _outside_project(real: str, root: str | None) -> bool:
    """Whether a file (or a folder, ending in os.sep) is no module of the project's
    own (those are the loader's local imports): outside its root, or in a
    ``site-packages`` folder inside it. A library's file need not lie on
    ``sys.path``: an editable install's finder imports it from its checkout."""
    if root and real.startswith(libraries.real_folder(root)):
        parts = real.split(os.sep)
        return "site-packages" in parts or "dist-packages" in parts
    return True


def _ran_state(real: str) -> str | None:
    """A reached file's ``imported_state``: as the worker imported it, while the
    file is still that; else as this job did."""
    held = libraries.HELD_FILES.get(real)
    if held is None:
        return imported_state(real, libraries.JOB_STARTED_NS)
    try:
        return held if stat_state(os.stat(real)) == held else CHANGED
    except OSError:
        return CHANGED


# -- in the worker -------------------------------------------------------------------------


def learn() -> None:
    """In the worker, after each ``libraries.hold``: resolve every module it holds,
    take the state of each library unit of theirs, and the walk from each top-level
    library (see the module's docstring)."""
    global _TAKEN_COUNT, _TAKEN_LAST
    tables = _tables()
    units: set[str] = set()
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] in KEYED_ELSEWHERE:
            continue
        real, keep = _node(name, module)
        if keep and real is not None and real in libraries.HELD_FILES:
            units.add(record_of(real, tables) or real)
    for unit in units:
        unit_state(unit)
    _WALKS.clear()
    for top in {name.partition(".")[0] for name in list(sys.modules)} - KEYED_ELSEWHERE:
        seen: set[str] = set()
        files: set[str] = set()
        todo = [top]
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(_step(name, None, files))
        names = frozenset(n for n in seen if sys.modules.get(n) is not None)
        folders = frozenset(os.path.dirname(f) + os.sep for f in files)
        _WALKS[top] = _Walk(names, frozenset(seen - names), frozenset(files), folders)
    _TAKEN_COUNT = len(sys.modules)
    _TAKEN_LAST = next(reversed(sys.modules), None)
    libraries.GROWN.clear()


# -- distributions ---------------------------------------------------------------------------

# Folder on sys.path -> (its modification time, file relative to it -> the RECORD of
# the distribution that lists it): built in the worker, inherited by its jobs, built
# again where a distribution was installed or removed since.
_RECORDS: dict[str, tuple[int, dict[str, str]]] = {}


def record_of(real: str, tables: dict[str, dict[str, str]] | None = None) -> str | None:
    """The RECORD of the installed distribution that lists the file ``real`` (a
    wheel's install; not an editable one, whose RECORD lists only its finder or
    ``.pth``), or None. ``tables``: ``_tables()``, for many files at once."""
    for folder in libraries.INSTALLED:
        if real.startswith(folder):
            found = (tables[folder] if tables is not None else _distributions(folder)).get(real[len(folder) :])
            if found is not None:
                return found
    return None


def _tables() -> dict[str, dict[str, str]]:
    """``_distributions`` of every installed folder: one stat each, not one per file."""
    return {folder: _distributions(folder) for folder in libraries.INSTALLED}


def _distributions(folder: str) -> dict[str, str]:
    """File relative to ``folder`` -> the RECORD that lists it, for the distributions
    installed in ``folder`` (read again once a distribution came or went: that
    changes the folder's modification time; not remembered while that time is too
    recent to vouch for it, ``states.settled``)."""
    try:
        mtime = os.stat(folder).st_mtime_ns
    except OSError:
        return {}
    known = _RECORDS.get(folder)
    if known is not None and known[0] == mtime:
        return known[1]
    files: dict[str, str] = {}
    try:
        entries = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".dist-info"))
    except OSError:
        entries = []
    for entry in entries:
        record = os.path.join(folder, entry, "RECORD")
        try:
            with open(record, encoding="utf-8", errors="surrogateescape") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            path = line.rpartition(",")[0].rpartition(",")[0]  # path,hash,size; a path may hold commas
            if path:
                files.setdefault(path, record)
    if states.settled(mtime):
        _RECORDS[folder] = (mtime, files)
    return files
