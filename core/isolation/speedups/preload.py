"""Libraries preloaded into the warm worker: the one place that decides what may be
preloaded, and records why a library was not. The zygote calls it while idle.

Why: each export runs in a fresh fork of the worker, which holds torch. A model built
with a library (transformers above all) imported that library again in every job,
which took longer than the export itself. Imported once into the worker, the library
is in every fork for free, as torch is. Measured, and when to switch it off
(``EXPORTLENS_PRELOAD=0``): docs/decisions/0005-preloading.md.

What: the library modules the jobs imported (each job reports them: ``Imported``,
``exportlens.core.export.libraries``), and those of the record of earlier workers
(``preload_record``): a restarted server warms the same set. Never a file of a
project: a job reports only installed libraries' modules, and the worker -- whose
``sys.path`` holds no project folder -- imports one only when it resolves to the very
file the job imported (a job's ``attr.py`` is the project's, and stays so).

When: while idle, ``IDLE_S`` after the last request, one module at a time: a
request that comes meanwhile waits for the module being imported at most, and the
rest waits until it is done. In a batch, which leaves no idle moment, before its next
job: the libraries the worker holds nothing of yet (``step(new_only=True)``), those
earlier jobs reported and those the next file's own top-level import statements name
(``predict``: without it, the first job of each worker imported transformers, and the
worker then again). The standby is dropped first (it would lack them). The
worker's memory before and after is reported (``Preloaded``).

Refused, and why (kept in the record, so no worker tries that version again): a
library whose import

- starts a thread (an OpenMP or BLAS pool too): a fork copies only the thread that
  forks, and a lock another thread held stays locked in every job (the worker asks
  OpenBLAS for one thread from its start, unless ``OPENBLAS_NUM_THREADS`` is set:
  scipy's pool was refused otherwise, and transformers with it where torchao is
  installed);
- installs a signal handler, changes ``sys.path`` or the working directory, sets a
  trace or profile function, or changes torch's global settings (default dtype or
  device, grad or inference mode, thread count, deterministic algorithms): every job
  would inherit it, including those of models that never import the library;
- changes anything else code that never imports the library could see
  (``observable``): a function or method of torch, of the standard library or of a
  library loaded before replaced (``torch.nn.functional.gelu = silu``, as speed-up
  libraries patch), a registry entry for one of torch's operators or classes (a
  decomposition, a fake-tensor rule), ``os.environ``. New names, and registrations of
  the library's own classes and operators, are seen only by code that uses the
  library, and are allowed;
- crashes or hangs the worker: the pool sees it die, or go silent, after
  ``Preloading`` named the module, records the refusal and starts another worker; the
  request it held goes to that one (``exportlens.core.isolation.pool``).

A worker made unsafe by an import cannot undo it: it retires, and the pool replaces
it. A module whose import raises is left to the jobs, which import it themselves.

Upgrades: the worker keeps the state of every library file it holds; while idle it
looks again every ``STALE_CHECK_S`` and retires when one changed (``pip install -U``),
so that the next job runs the new version (and the cache key, which has the state of
the libraries a model imported, misses the results made with the old one).
"""

from __future__ import annotations

import ast
import gc
import importlib
import importlib.util
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import psutil

from exportlens.core.disk.states import library_state
from exportlens.core.export import libraries, library_units
from exportlens.core.isolation.capabilities import proc_listdir, proc_text
from exportlens.core.isolation.hooks import Lessons, SpeedUp, Worker
from exportlens.core.isolation.messages import FromWorker, Imported, Preloaded, Preloading
from exportlens.core.isolation.speedups import fakecache, observable, preload_record, switches
from exportlens.core.trace import mark

if TYPE_CHECKING:
    from exportlens.core.model.request import ExportRequest

log = logging.getLogger("exportlens.preload")

STATE = switches.decide("EXPORTLENS_PRELOAD", gains="the libraries jobs import are imported in the worker while it is idle")
ENABLED = STATE.on
IDLE_S = 0.1  # idle this long after a request before importing: a save right after a result is not kept waiting
STALE_CHECK_S = float(os.environ.get("EXPORTLENS_STALE_CHECK_S", "5"))
MAX_PENDING = 20000
_UNCATCHABLE = {getattr(signal, name) for name in ("SIGKILL", "SIGSTOP") if hasattr(signal, name)}  # neither on Windows
_SIGNALS = tuple(s for s in signal.valid_signals() if s not in _UNCATCHABLE)


def _top(name: str) -> str:
    """The library of a pending name: ``transformers`` of ``transformers.models.bert``
    and of ``transformers:BertModel`` (``predicted_imports``)."""
    return name.partition(":")[0].partition(".")[0]


def predicted_imports(text: str) -> list[str]:
    """What a model file's top-level import statements name, as pending names:
    ``import a.b`` is ``a.b``, ``from a import b`` is ``a:b`` (a module ``a.b`` or a
    name of ``a``: a lazy library, transformers, imports the module that defines it
    when asked). Only statements the file runs first thing, whatever happens: none
    inside an ``if``, ``try`` or function, no relative or star import. Never raises."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [f"{node.module}:{alias.name}" for alias in node.names if alias.name != "*"]
    return names


@dataclass(frozen=True)
class Interpreter:
    """What an import may change that every later fork would inherit."""

    threads: frozenset[str]
    handlers: tuple[Any, ...]
    path: tuple[str, ...]
    cwd: str
    tracing: tuple[Any, Any]
    torch: tuple[Any, ...]


def interpreter() -> Interpreter:
    import torch

    try:
        threads = frozenset(proc_listdir("self/task"))
    except OSError:  # no /proc (``capabilities``): Python's threads only, a native one goes unseen
        threads = frozenset(f"{t.native_id} ({t.name})" for t in threading.enumerate())
    return Interpreter(
        threads=threads,
        handlers=tuple(signal.getsignal(s) for s in _SIGNALS),
        path=tuple(sys.path),
        cwd=os.getcwd(),
        tracing=(sys.gettrace(), sys.getprofile()),
        torch=(
            torch.get_default_dtype(),
            str(torch.get_default_device()),
            torch.is_grad_enabled(),
            torch.is_inference_mode_enabled(),
            torch.get_num_threads(),
            torch.are_deterministic_algorithms_enabled(),
        ),
    )


def unsafe(before: Interpreter, after: Interpreter) -> str | None:
    """Why the change from ``before`` to ``after`` makes the worker unfit to fork
    jobs from; None when it does not."""
    started = sorted(after.threads - before.threads)
    if started:
        python = {str(t.native_id): t.name for t in threading.enumerate()}
        names = ", ".join(python.get(t) or _thread_name(t) for t in started)
        return f"its import starts {len(started)} thread(s) ({names}): a fork copies only the forking thread, and a lock one of them held would stay locked in every job"
    if after.handlers != before.handlers:
        changed = [
            signal.Signals(s).name for s, a, b in zip(_SIGNALS, before.handlers, after.handlers, strict=True) if a != b
        ]
        return f"its import installs a handler for {', '.join(changed)}, which every job would inherit"
    if after.path != before.path:
        return "its import changes sys.path, which every job would inherit"
    if after.cwd != before.cwd:
        return "its import changes the working directory, which every job would inherit"
    if after.tracing != before.tracing:
        return "its import sets a trace or profile function, which every job would inherit"
    if after.torch != before.torch:
        return "its import changes torch's global settings (default dtype or device, grad mode, threads, determinism), which every job would inherit"
    return None


# Whether the worker asked OpenBLAS for one thread (``one_blas_thread``); a job
# forked from it gives the user's environment back (``user_blas_threads``).
PINNED_BLAS = False


def one_blas_thread() -> None:
    """At the worker's start, before torch (and numpy with it) loads: OpenBLAS --
    numpy's, and scipy's, which transformers imports where torchao is installed --
    starts its thread pool when it loads, reading ``OPENBLAS_NUM_THREADS`` once. Unless
    the user chose a number, one thread: the worker stays single-threaded, and a
    library that loads an OpenBLAS is not refused for its pool. Jobs inherit loaded
    OpenBLAS libraries with one thread (torch's own threads are the job's to set)."""
    global PINNED_BLAS
    if "OPENBLAS_NUM_THREADS" not in os.environ:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        PINNED_BLAS = True


def user_blas_threads() -> None:
    """In a job: the user's environment again, for the processes the model starts."""
    if PINNED_BLAS:
        os.environ.pop("OPENBLAS_NUM_THREADS", None)


def _thread_name(tid: str) -> str:
    """The name the system knows a thread by (a Python thread's is its process's)."""
    try:
        with proc_text(f"self/task/{tid}/comm") as f:
            return f.read().strip() or tid
    except OSError:
        return tid


def rss_kb() -> int:
    """This process's resident set, in kB (psutil, every platform)."""
    try:
        return int(psutil.Process().memory_info().rss) // 1024
    except psutil.Error:
        return 0


class Preloader:
    """One worker's preloading: what it still has to import, what it holds, what it
    refused. ``path``: the record (None: nothing kept beyond this worker's life)."""

    def __init__(self, path: str | None, send: Callable[[FromWorker], None]) -> None:
        self.path = path
        self.send = send
        self.pending: dict[str, str] = {}  # module -> the real file the job imported ("": from the record)
        self.refused: dict[str, str] = {}  # library -> why
        self.modules: dict[str, list[str]] = {}  # library -> modules preloaded, in order
        self.watched: dict[str, str] = {}  # real file of a library module held -> its state then
        self.used: set[str] = set()  # preloaded libraries a model imported ...
        self.noted: set[str] = set()  # ... and those of them the record says so of (today)
        self.noted_day = preload_record.today()
        self.rss_before_kb = 0
        self.checked = time.monotonic()
        self.seen = observable.ObservedState()  # what other code sees, as the last import left it
        self.learned = False  # whether ``library_units`` learned what the worker holds now

    def start(self, since_ns: int) -> None:
        """After the warm-up (which began at ``since_ns``, wall clock): note what the
        worker holds, and what the record says to preload (a refusal for another state
        of its library is tried again)."""
        self.rss_before_kb = rss_kb()
        libraries.hold(since_ns)
        for file, state in libraries.HELD.values():
            self.watched.setdefault(file, state)
        if not ENABLED or self.path is None:
            return
        record = preload_record.read(self.path)
        self._note_refusals(record)
        for name, library in record.libraries.items():
            if name not in self.refused:
                for module in library.modules:
                    if module not in sys.modules:
                        self.pending.setdefault(module, "")

    def _note_refusals(self, record: preload_record.Record) -> None:
        """Take the record's refusals (one for another state of its library is tried again)."""
        for name, refusal in record.refused.items():
            if not refusal.file or library_state(refusal.file) == refusal.state:
                self.refused[name] = refusal.reason

    @property
    def wanted(self) -> bool:
        """Whether there is idle work: modules to import, uses to note in the record,
        or what the worker holds to learn."""
        return bool(self.pending) or bool(self.used - self.noted) or not self.learned

    def learn(self, imported: Imported) -> None:
        """A job's report: its library modules become candidates; its use of preloaded
        libraries is noted for the record. (Written while idle, not now: the result
        is on its way.)"""
        if not ENABLED:
            return
        if preload_record.today() != self.noted_day:  # a server up for days: note each day's use
            self.noted_day, self.noted = preload_record.today(), set()
        self.used.update(imported.used)
        for name, file in zip(imported.modules, imported.files, strict=False):
            if len(self.pending) >= MAX_PENDING:
                break
            if _top(name) not in self.refused and name not in sys.modules:
                self.pending.setdefault(name, file)

    def predict(self, text: str, folders: tuple[str, ...]) -> None:
        """Before a batch's next file, whose text is ``text``: the libraries its
        top-level imports name that the worker holds nothing of, as pending. Its job
        would import them, and report them for the worker to import again; imported
        first here, the job finds them. Not the standard library, torch, or a name a
        file or folder of ``folders`` (the file's own, its project's) would shadow:
        the job would import that, as Python does."""
        if not ENABLED:
            return
        for name in predicted_imports(text)[:MAX_PENDING]:
            top = _top(name)
            if top in sys.modules or top in self.refused or top in sys.stdlib_module_names:
                continue
            if any(os.path.exists(os.path.join(folder, top + ".py")) or os.path.isdir(os.path.join(folder, top)) for folder in folders):
                continue
            self.pending.setdefault(name, "")

    @property
    def new_libraries(self) -> bool:
        """Whether a pending module is of a library the worker holds nothing of yet
        (its top-level module is not imported here): what a batch waits for."""
        return any(_top(name) not in sys.modules and _top(name) not in self.refused for name in self.pending)

    def step(self, interrupted: Callable[[], bool], new_only: bool = False) -> str | None:
        """Import pending modules until done or ``interrupted()``; then tell the pool
        what the worker holds. Returns why the worker must retire (an import left it
        unfit to fork), else None.

        ``new_only`` (before a batch's next job): only the modules of libraries the
        worker holds nothing of yet; more modules of a library it holds (a model
        family's own, ``transformers.models.llama``) stay pending for an idle moment.
        Their import is a fraction of what preloading them costs (what other code
        sees taken and compared, the library units learned again: several times
        what the job that needs them spends importing them,
        docs/decisions/0005-preloading.md), and a batch's next file is often of
        another family."""
        if self.path is not None and self.pending:
            # Another worker may have refused a library since this one started (both
            # ran jobs that import it): an import it would retire for costs a worker.
            self._note_refusals(preload_record.read(self.path))
        tops: dict[str, tuple[str, str]] = {}  # library -> its top-level file and state
        started_ns = time.time_ns()
        imported = 0
        announced = False
        gc.disable()  # an import makes many objects; collections meanwhile only cost time
        # One library's modules one after the other: what other code sees is compared
        # once a library is done, not after each of its modules.
        groups: dict[str, list[tuple[str, str]]] = {}
        for name, expected in self.pending.items():
            groups.setdefault(_top(name), []).append((name, expected))
        held = {top: group for top, group in groups.items() if new_only and top in sys.modules}
        self.pending = {name: expected for top, group in groups.items() if top not in held for name, expected in group}
        current: str | None = None  # the library imported since the last comparison
        try:
            while True:
                top = _top(next(iter(self.pending))) if self.pending and not interrupted() else None
                if current is not None and top != current:
                    why = _changes_seen(self.seen, current)
                    if why is not None:
                        self._refuse(current, why, *tops[current])
                        return why
                    current = None
                if top is None:
                    break
                name, expected = next(iter(self.pending.items()))
                del self.pending[name]
                if top in self.refused or name in sys.modules:
                    continue
                if top not in tops:
                    tops[top] = _top_file(top)
                file, state = tops[top]
                self.send(Preloading(name, top, file, state))
                announced = True
                mark(f"zygote: preloading {name}")
                if current is None:
                    # What other code sees now (while idle): since the last
                    # library, the worker itself answered questions and forked jobs.
                    self.seen = observable.take()
                    current = top
                before_modules = set(sys.modules)
                before = interpreter()
                since_ns = time.time_ns()
                got = self._import(name, expected)
                why = unsafe(before, interpreter())
                if why is not None:
                    self._refuse(top, why, file, state)
                    return why
                if got is not None:
                    imported += 1
                    self.modules.setdefault(top, []).append(got)
                self._watch(libraries.new_library_modules(before_modules, None), since_ns)
        finally:
            gc.enable()
            gc.freeze()  # shared with every job from now on: keep the collector off them
            for group in held.values():  # left for an idle moment
                for name, expected in group:
                    self.pending.setdefault(name, expected)
        if imported:
            libraries.hold(started_ns, self.watched)
            libraries.PRELOADED = frozenset(self.modules)
            fakecache.settle()  # a library's own operators and rules are the zygote's now
        if imported or not self.learned:
            # What each job forked from now on looks up rather than works out
            # (docs/decisions/0010-library-units-walked-once.md): idle work, not the
            # first request's.
            mark("zygote: learning library units")
            library_units.learn()
            self.learned = True
            mark("zygote: library units learned")
        if imported or self.used - self.noted:
            self._save()
        if announced:
            self._tell()  # also tells the pool that the import it was told of is over
        return None

    def _import(self, name: str, expected: str) -> str | None:
        """Import ``name`` if it is the library module the job imported; the module
        imported (the record keeps it), None if none was. ``a:b`` (``predict``): the
        module ``a.b`` if there is one, else ``a``'s name ``b``, whose module is then
        the one that defines it."""
        module_name, _, attribute = name.partition(":")
        try:
            spec = importlib.util.find_spec(module_name)
            origin = os.path.realpath(spec.origin) if spec is not None and spec.origin and spec.has_location else None
            if origin is None or not libraries.is_library_file(origin, None) or (expected and origin != expected):
                log.debug("not preloading %s: it is not the installed module a job imported", name)
                return None
            module = importlib.import_module(module_name)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - an import that fails costs only its jobs the import
            log.info("not preloading %s: its import raised %s: %s", name, type(e).__name__, e)
            return None
        if not attribute:
            return module_name
        try:
            if hasattr(module, "__path__") and importlib.util.find_spec(f"{module_name}.{attribute}") is not None:
                importlib.import_module(f"{module_name}.{attribute}")
                return f"{module_name}.{attribute}"
            defined_in = getattr(getattr(module, attribute, None), "__module__", None)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - the job asks for the name itself, and sees what happens
            log.info("preloaded %s, not its %s: that raised %s: %s", module_name, attribute, type(e).__name__, e)
            return module_name
        ours = isinstance(defined_in, str) and defined_in.partition(".")[0] == module_name.partition(".")[0] and defined_in in sys.modules
        return defined_in if ours and isinstance(defined_in, str) else module_name

    def _refuse(self, library: str, reason: str, file: str, state: str) -> None:
        self.refused[library] = reason
        if self.path is not None:
            preload_record.refuse(self.path, library, reason, file, state)
        self._tell()

    def _tell(self) -> None:
        held = sum(len(m) for m in self.modules.values())
        refused = tuple(f"{name}: {why}" for name, why in sorted(self.refused.items()))
        self.send(Preloaded(held, tuple(sorted(self.modules)), refused, self.rss_before_kb, rss_kb()))
        mark(f"zygote: preloaded {held} modules")

    def _save(self) -> None:
        """Add what this worker preloaded, and the libraries models used, to the record."""
        used, self.noted = set(self.used), set(self.used)
        if self.path is None:
            return
        day = preload_record.today()
        modules = {top: list(names) for top, names in self.modules.items()}

        def change(record: preload_record.Record) -> None:
            for top, names in modules.items():
                library = record.libraries.setdefault(top, preload_record.Library(used=day))
                known = set(library.modules)
                library.modules += [n for n in names if n not in known]
            for top in used:
                if top in record.libraries:
                    record.libraries[top].used = day

        preload_record.update(self.path, change)

    # -- upgrades --------------------------------------------------------------------

    def _watch(self, modules: list[tuple[str, str]], since_ns: int) -> None:
        """Note the state of the files of ``modules``, imported from ``since_ns`` on."""
        for _, file in modules:
            if file not in self.watched:
                state = libraries.imported_state(file, since_ns)
                if state is not None:
                    self.watched[file] = state

    def stale(self) -> str | None:
        """Why what the worker holds is out of date (a library file changed since it
        was imported), at most every ``STALE_CHECK_S``; None when it is not."""
        now = time.monotonic()
        if now - self.checked < STALE_CHECK_S:
            return None
        self.checked = now
        for file, state in self.watched.items():
            if library_state(file) != state:
                return f"{file} changed on disk since the worker imported it"
        return None

    def next_check_s(self) -> float:
        """Seconds until the next look at the files held."""
        return max(0.0, STALE_CHECK_S - (time.monotonic() - self.checked))


class PreloadSpeedUp(SpeedUp):
    """Preloading as the zygote's plug-in: it imports what jobs imported while idle,
    and before a batch's next file the libraries it will import (``Preloader``)."""

    name = "preloading"

    def __init__(self, preloader: Preloader) -> None:
        self.preloader = preloader

    def idle(self, worker: Worker, idle_s: float) -> tuple[bool, str | None]:
        if not self.preloader.wanted or idle_s < IDLE_S or worker.input_waiting():
            return False, None
        worker.drop_standbys()  # they would lack what is imported now, and copy-on-write slows the imports
        return True, self.preloader.step(worker.input_waiting)

    def idle_timeout(self, idle_s: float) -> float | None:
        return max(0.0, IDLE_S - idle_s) if self.preloader.wanted else None

    def before(self, worker: Worker, request: ExportRequest, batch: bool) -> str | None:
        """Before the next request of a batch (``Export.more``): import the libraries
        earlier jobs imported that the worker holds nothing of yet, as ``idle`` would,
        since a batch leaves the worker no idle moment and each of its jobs would import
        them again. More modules of a library it holds wait for an idle moment
        (``Preloader.step``'s ``new_only``). The libraries the next file's own top-level
        imports name count too (``Preloader.predict``): else the first job of each
        worker imports them, and the worker again after it."""
        if not batch:
            return None
        text = worker.model_text(request)
        self.preloader.predict(text, tuple(dict.fromkeys(f for f in (os.path.dirname(request.path), request.root) if f)))
        if not self.preloader.new_libraries:
            return None
        mark(f"zygote: preloading before request {request.id}, of a batch")
        worker.drop_standbys(forks_only=True)  # they would lack what is imported now
        return self.preloader.step(lambda: worker.exiting, new_only=True)

    def learn(self, attempt: Lessons, forked: bool) -> None:
        if attempt.imported is not None:
            self.preloader.learn(attempt.imported)


def _changes_seen(seen: observable.ObservedState, library: str) -> str | None:
    """Why an import of ``library``'s left something behind that the jobs of files
    which never import it would see (``observable``); None when it did not."""
    found = observable.changes(seen, own=library)
    if not found:
        return None
    return f"its import changes what code that never imports it sees ({'; '.join(found)}), which every job would inherit"


def _top_file(top: str) -> tuple[str, str]:
    """A library's top-level file and its state ("" when unknown): what a refusal keeps."""
    module = sys.modules.get(top)
    real = libraries.module_file(module, top) if module is not None else None
    if real is None:
        try:
            spec = importlib.util.find_spec(top)  # a top-level name: runs no code
        except (ImportError, ValueError):
            spec = None
        real = os.path.realpath(spec.origin) if spec is not None and spec.origin and spec.has_location else None
    if real is None:
        return "", ""
    return real, library_state(real) or ""
