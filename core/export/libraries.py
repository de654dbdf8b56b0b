"""Installed libraries as the worker and its jobs see them. Torch-free.

Which modules are a library's: a module whose file lies under one of the worker's
own ``sys.path`` folders -- taken in the worker before any project folder is on
it, so the standard library, site-packages and ``PYTHONPATH`` -- and not under the
project's root (unless inside a ``site-packages`` folder there: a virtualenv in the
project), and not exportlens's own. Everything else a job imports is the project's:
compiled fresh from source in every job (``loader``), never imported into the worker.

A job reports the library modules it imported (``new_library_modules``: what the
worker may preload, ``exportlens.core.isolation.preload``) and the libraries the
user's code imported by name (``watching``, and the classes of the built modules):
the cache key holds each one's state (``depended_on``), so upgrading a library the
model imports invalidates its results, while a library only preloaded beside it
does not. A library is keyed by its top-level module's file (``library_state``):
installing any other version rewrites that file.

A library the worker preloaded is in every job's ``sys.modules`` before the user's
file runs, where a module of the project with the same name (an ``attr.py`` next to
the model) would have been found first: ``unshadow`` takes such a library out of the
job's ``sys.modules`` so that the user's import finds the project's file, as it would
without preloading.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import sys
import sysconfig
import time
from collections.abc import Iterable, Iterator
from typing import Any

from exportlens.core.cache.keys import package_folders, stat_state

# Set in the worker before any project folder is on sys.path (``survey``), inherited
# by every job it forks.
INSTALLED: tuple[str, ...] = ()  # real folders, each ending in os.sep
STDLIB: tuple[str, ...] = ()  # the standard library's folders (its state is Python's version)
OWN: tuple[str, ...] = ()  # exportlens's own package folders
# Top-level library -> (its file, its state) for the libraries the worker holds in
# memory, taken when it imported them: what a job forked from it runs (``hold``).
HELD: dict[str, tuple[str, str]] = {}
# Top-level libraries the worker preloaded (not imported by torch or exportlens).
PRELOADED: frozenset[str] = frozenset()
# The state of a file that changed while a process imported it: it may hold either
# version, so the state equals none on disk (no cached result matches it, and the
# worker sees it as stale).
CHANGED = "changed while it was imported"
_CLOCK_SLACK_NS = 1_000_000_000  # file systems that keep times to the second
# Never keyed by their files: their versions are in the first key already.
_KEYED_ELSEWHERE = frozenset({"torch", "exportlens", "__main__"})
_NEVER_LIBRARIES = frozenset({"exportlens", "__main__"})

# Top-level names the user's code imported in this job (``watching``, ``note_classes``),
# and when the job began (wall clock).
_used: set[str] = set()
_started_ns = 0


def _folder(path: str) -> str:
    return os.path.realpath(path).rstrip(os.sep) + os.sep


def survey() -> None:
    """Take the worker's installed folders: called once, before any project folder is on ``sys.path``."""
    global INSTALLED, STDLIB, OWN
    OWN = tuple(_folder(folder) for _, folder in package_folders())
    paths = sysconfig.get_paths()
    STDLIB = tuple(dict.fromkeys(_folder(paths[k]) for k in ("stdlib", "platstdlib") if paths.get(k)))
    INSTALLED = tuple(dict.fromkeys(_folder(p) for p in sys.path if p and os.path.isdir(p)))


def _under(path: str, folders: tuple[str, ...]) -> bool:
    return path.startswith(folders)


def _stdlib(real: str) -> bool:
    """Whether a real path is the standard library's (a system Python keeps its
    site-packages inside the standard library's folder)."""
    if not _under(real, STDLIB):
        return False
    parts = real.split(os.sep)
    return "site-packages" not in parts and "dist-packages" not in parts


def is_library_file(real: str, root: str | None) -> bool:
    """Whether the real path ``real`` is an installed library's file for a job of the
    project at ``root``."""
    if not _under(real, INSTALLED) or _under(real, OWN):
        return False
    if root and real.startswith(_folder(root)):
        parts = real.split(os.sep)
        return "site-packages" in parts or "dist-packages" in parts
    return True


def module_file(module: Any, name: str) -> str | None:
    """The real path of a module's file, if it is a plain module of that name (not an
    alias another name was bound to, not a namespace package, not built in)."""
    spec = getattr(module, "__spec__", None)
    file = getattr(module, "__file__", None)
    if spec is None or getattr(spec, "name", None) != name or not isinstance(file, str):
        return None
    return os.path.realpath(file)


def new_library_modules(before: Iterable[str], root: str | None) -> list[tuple[str, str]]:
    """``(name, real file)`` of the library modules imported since ``before`` (a
    set of names of ``sys.modules``), in the order they were first imported."""
    seen = set(before)
    out = []
    for name, module in list(sys.modules.items()):
        if name in seen or name.partition(".")[0] in _NEVER_LIBRARIES:
            continue
        real = module_file(module, name)
        if real is not None and is_library_file(real, root):
            out.append((name, real))
    return out


# -- what the user's code imported ------------------------------------------------------


def reset() -> None:
    """A job starts: nothing imported by the user's code yet."""
    global _started_ns
    _used.clear()
    _started_ns = time.time_ns()


@contextlib.contextmanager
def watching(root: str | None) -> Iterator[None]:
    """Note the top-level name of each absolute import that the project's own code
    (the file, its local modules: files under ``root`` that are no library's) makes
    while it runs -- also those ``sys.modules`` answers, which is how a preloaded
    library is imported; not those a library makes in turn."""
    original = builtins.__import__
    under = _folder(root) if root else None
    own: dict[str, bool] = {}  # importer's file -> whether it is the project's

    def projects(file: Any) -> bool:
        if not isinstance(file, str) or under is None:
            return False
        found = own.get(file)
        if found is None:
            real = os.path.realpath(file)
            found = own[file] = real.startswith(under) and not is_library_file(real, root)
        return found

    def __import__(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if not level and name and globals is not None and projects(globals.get("__file__")):
            _used.add(name.partition(".")[0])
        return original(name, globals, locals, fromlist, level)

    builtins.__import__ = __import__
    try:
        yield
    finally:
        if builtins.__import__ is __import__:  # the model may have replaced it in turn
            builtins.__import__ = original


def note_classes(module: Any) -> None:
    """The libraries whose classes a built module tree is made of (a model built by a
    function that imported its library where the watch did not see it)."""
    try:
        for sub in module.modules():
            _used.add(str(type(sub).__module__).partition(".")[0])
    except Exception:  # noqa: BLE001 - a module tree that cannot be walked adds nothing
        pass


def depended_on(root: str | None) -> dict[str, str]:
    """File of each library the user's code imported -> its state: as the worker
    imported it when it holds it, else as it is now (imported by this job)."""
    out: dict[str, str] = {}
    for top in sorted(_used - _KEYED_ELSEWHERE):
        held = HELD.get(top)
        if held is not None:
            out[held[0]] = held[1]
            continue
        real = module_file(sys.modules.get(top), top)
        if real is None or not is_library_file(real, root) or _stdlib(real):
            continue
        state = imported_state(real, _started_ns)
        if state is not None:
            out[real] = state
    return dict(sorted(out.items()))


def preloaded_used() -> list[str]:
    """The preloaded libraries the user's code imported (what their record keeps in use)."""
    return sorted(_used & PRELOADED)


# -- in the worker ---------------------------------------------------------------------


def imported_state(real: str, since_ns: int) -> str | None:
    """The state of a file a process imported from ``since_ns`` on (wall clock): as
    ``library_state``, or ``CHANGED`` when it changed since (None: gone)."""
    try:
        st = os.stat(real)
    except OSError:
        return None
    return CHANGED if st.st_ctime_ns >= since_ns - _CLOCK_SLACK_NS else stat_state(st)


def hold(since_ns: int, known: dict[str, str] | None = None) -> None:
    """Note the file and state of every top-level library in memory now (``HELD``),
    imported from ``since_ns`` on; ``known``: states already taken, by file."""
    for name, module in list(sys.modules.items()):
        if "." in name or name in HELD or name in _KEYED_ELSEWHERE:
            continue
        real = module_file(module, name)
        if real is None or not is_library_file(real, None) or _stdlib(real):
            continue
        state = (known or {}).get(real) or imported_state(real, since_ns)
        if state is not None:
            HELD[name] = (real, state)


# -- in the job, before the user's file runs ----------------------------------------------


def unshadow(entries: Iterable[str | None]) -> list[str]:
    """Take out of ``sys.modules`` each preloaded library that a project file would
    shadow: ``name.py`` or ``name/__init__.py`` in one of the project's ``sys.path``
    ``entries``. The names taken out."""
    folders = [e for e in dict.fromkeys(entries) if e]
    out = []
    for top in sorted(PRELOADED):
        if any(
            os.path.isfile(os.path.join(f, top + ".py")) or os.path.isfile(os.path.join(f, top, "__init__.py"))
            for f in folders
        ):
            for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
                del sys.modules[name]
            HELD.pop(top, None)  # what the user's import finds now is the project's file
            out.append(top)
    return out
