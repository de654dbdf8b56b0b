"""Installed libraries as the worker and its jobs see them. Torch-free.

Which modules are a library's: a module whose file lies under one of the worker's
own ``sys.path`` folders -- taken in the worker before any project folder is on
it, so the standard library, site-packages and ``PYTHONPATH`` -- and not under the
project's root (unless inside a ``site-packages`` folder there: a virtualenv in the
project), and not exportlens's own. Everything else a job imports is the project's:
compiled fresh from source in every job (``loader``), never imported into the worker.

A job reports the library modules it imported (``new_library_modules``: what the
worker may preload, ``exportlens.core.isolation.speedups.preload``), what its own code imported
(``watching``, ``note_classes``: ``NAMED``) and, for the whole process, what each
import statement of a library named (``record_imports``: ``EDGES``), from which
``library_units`` finds the library files its result depends on, for its cache key.

A library the worker preloaded is in every job's ``sys.modules`` before the user's
file runs, where a module of the project with the same name (an ``attr.py`` next to
the model) would have been found first: ``unshadow`` takes such a library out of the
job's ``sys.modules`` so that the user's import finds the project's file, as it would
without preloading.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import importlib
import os
import sys
import sysconfig
import time
from collections.abc import Iterable, Iterator
from typing import Any

from exportlens.core.disk.own import package_folders
from exportlens.core.disk.states import stat_state

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
# Real file of every library module the worker holds -> its state when imported
# (``imported_state``): a job keys such a file only while it is still that.
HELD_FILES: dict[str, str] = {}
# Importing module -> the modules its import statements named (``name``, and
# ``name.x`` for each ``x`` of a fromlist: a submodule, or an attribute that
# ``library_units`` then finds no module of), for the worker's life and then the
# job's (``record_imports``).
EDGES: dict[str, set[str]] = {}
# The importers whose edges grew since the worker took its walks
# (``library_units.learn`` empties it): what a job walks on from.
GROWN: set[str] = set()
# The state of a file that changed while a process imported it: it may hold either
# version, so the state equals none on disk (no cached result matches it, and the
# worker sees it as stale).
CHANGED = "changed while it was imported"
_CLOCK_SLACK_NS = 1_000_000_000  # file systems that keep times to the second
# Never keyed by their files: their versions are in the first key already.
KEYED_ELSEWHERE = frozenset({"torch", "exportlens", "__main__"})
_NEVER_LIBRARIES = frozenset({"exportlens", "__main__"})

# Top-level names the user's code imported in this job (``watching``, ``note_classes``),
# the modules it named (as ``EDGES``), and when the job began (wall clock).
_used: set[str] = set()
NAMED: set[str] = set()
JOB_STARTED_NS = 0


@functools.lru_cache(maxsize=256)
def real_folder(path: str) -> str:
    """A folder's real path, with its separator (memoized: a job asks it of the
    project root for each of a thousand library files; a folder's realpath does not
    change while a process runs, as sys.path's entries are read once too)."""
    return os.path.realpath(path).rstrip(os.sep) + os.sep


_REAL_FOLDERS: dict[str, str] = {}


def real_path(path: str) -> str:
    """A module's file in its real folder (memoized: a job resolves a thousand files
    of a few dozen folders, transformers', and a realpath is an lstat per path
    component). A file that is itself a link stays as named: as a RECORD lists it."""
    folder, name = os.path.split(os.path.abspath(path))
    real = _REAL_FOLDERS.get(folder)
    if real is None:
        real = _REAL_FOLDERS[folder] = os.path.realpath(folder)
    return os.path.join(real, name)


def survey() -> None:
    """Take the worker's installed folders: called once, before any project folder is on ``sys.path``."""
    global INSTALLED, STDLIB, OWN
    OWN = tuple(real_folder(f) for _, f in package_folders())
    paths = sysconfig.get_paths()
    STDLIB = tuple(dict.fromkeys(real_folder(paths[k]) for k in ("stdlib", "platstdlib") if paths.get(k)))
    INSTALLED = tuple(dict.fromkeys(real_folder(p) for p in sys.path if p and os.path.isdir(p)))
    record_imports()


def _under(path: str, folders: tuple[str, ...]) -> bool:
    return path.startswith(folders)


def is_stdlib(real: str) -> bool:
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
    if root and real.startswith(real_folder(root)):
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
    global JOB_STARTED_NS
    _used.clear()
    NAMED.clear()
    JOB_STARTED_NS = time.time_ns()


@contextlib.contextmanager
def watching(root: str | None) -> Iterator[None]:
    """Note each absolute import that the project's own code (the file, its local
    modules: files under ``root`` that are no library's) makes while it runs -- also
    those ``sys.modules`` answers, which is how a preloaded library is imported; not
    those a library makes in turn (``EDGES`` has those)."""
    original = builtins.__import__
    under = real_folder(root) if root else None
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
            _note(NAMED, name, fromlist)
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
            name = str(type(sub).__module__)
            _used.add(name.partition(".")[0])
            NAMED.add(name)
    except Exception:  # noqa: BLE001 - a module tree that cannot be walked adds nothing
        pass


def _note(names: set[str], name: str, fromlist: Any) -> None:
    """Add what an import of ``name`` with ``fromlist`` may have run to ``names``.
    Makes no container object (a tuple per import made the collector run more often:
    a first export, which imports ~400 of torch's modules, took 1.7x as long)."""
    names.add(name)
    if fromlist:
        for n in fromlist:
            if type(n) is str and n != "*":
                names.add(name + "." + n)


def record_imports() -> None:
    """From now on, for this process and the jobs forked from it, note in ``EDGES``
    what each import statement (and ``importlib.import_module``) of a module other
    than torch's, exportlens's or the standard library's names: the edges
    ``library_units`` follows from the user's imports to every library module they
    reach. Installed in the worker before it preloads anything, so what a preloaded
    module imported is known to every job. Once per process."""
    if getattr(builtins.__import__, "__exportlens_edges__", False):
        return
    original = builtins.__import__
    original_module = importlib.import_module
    tracked: dict[str, bool] = {}  # importing module's name -> whether its edges count

    def counts(importer: Any) -> bool:
        if not isinstance(importer, str):
            return False
        file = getattr(sys.modules.get(importer), "__file__", None)
        real = real_path(file) if isinstance(file, str) else None
        tracked[importer] = found = importer.partition(".")[0] not in KEYED_ELSEWHERE and not (
            real is not None and (is_stdlib(real) or _under(real, OWN))
        )
        return found

    # Every import statement of the process runs this: torch's (most of an export's)
    # cost a dict look-up on top of the import itself.
    def __import__(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        module = original(name, globals, locals, fromlist, level)
        if globals is not None:
            importer = globals.get("__name__")
            if tracked.get(importer) or (importer not in tracked and counts(importer)):
                try:
                    edges = EDGES.get(importer)
                    if edges is None:
                        edges = EDGES[importer] = set()
                    had = len(edges)
                    # A relative import has a fromlist: ``module`` is then the module named.
                    _note(edges, name if not level else module.__name__, fromlist)
                    if len(edges) != had:
                        GROWN.add(importer)
                except Exception:  # noqa: BLE001 - noting must never break an import
                    pass
        return module

    def import_module(name: str, package: str | None = None) -> Any:
        module = original_module(name, package)
        try:
            importer: Any = sys._getframe(1).f_globals.get("__name__")
            if tracked.get(importer) or (importer not in tracked and counts(importer)):
                edges = EDGES.setdefault(importer, set())
                if module.__name__ not in edges:
                    edges.add(module.__name__)
                    GROWN.add(importer)
        except Exception:  # noqa: BLE001 - as above
            pass
        return module

    __import__.__exportlens_edges__ = True  # type: ignore[attr-defined]
    builtins.__import__ = __import__
    importlib.import_module = import_module  # what lazy loaders (transformers') call


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
    and the state of every library module's file (``HELD_FILES``), imported from
    ``since_ns`` on; ``known``: states already taken, by file."""
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] in KEYED_ELSEWHERE:
            continue
        file = getattr(module, "__file__", None)
        if not isinstance(file, str):
            continue
        real = real_path(file)
        if is_stdlib(real) or _under(real, OWN):
            continue
        if real not in HELD_FILES:
            state = (known or {}).get(real) or imported_state(real, since_ns)
            if state is not None:
                HELD_FILES[real] = state
        if "." in name or name in HELD or module_file(module, name) is None or not is_library_file(real, None):
            continue
        state = HELD_FILES.get(real)
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
        if any(_shadows(f, top) for f in folders):
            for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
                del sys.modules[name]
            HELD.pop(top, None)  # what the user's import finds now is the project's file
            out.append(top)
    return out


def _shadows(folder: str, top: str) -> bool:
    """Whether ``folder`` holds a file that an import of ``top`` would find instead of
    the preloaded library: not the library's own file (a model file inside an installed
    package, as torch's ExportDB examples are, has site-packages on its ``sys.path``:
    taking torch's or functorch's modules out there made the job import their
    extensions a second time, and every later export failed with ``SystemError: ...
    bad call flags``)."""
    for candidate in (os.path.join(folder, top, "__init__.py"), os.path.join(folder, top + ".py")):
        if os.path.isfile(candidate):
            own = getattr(sys.modules.get(top), "__file__", None)
            return not (own and os.path.realpath(own) == os.path.realpath(candidate))
    return False
