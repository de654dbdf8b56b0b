"""Every thread and executor of the server process: made, named and stopped here.

Nothing else in ``server/`` starts a thread or an executor, nor uses asyncio's
default one (``tests/server/test_threads.py`` reads the sources to keep it so). The
few threads that core modules start for the server are listed below too. Torch runs
in none of them: exports run in worker processes.

The path of a save through them::

    stdin reader ─▶ event loop ─▶ lookups (the cache) ─▶ pool thread ─▶ worker process
      ─▶ pool thread ─▶ event loop (published) ─▶ io (hover index, hints, re-check)
                                                └▶ stores (the check, then the writing)
      ─▶ client

A cache hit leaves out the pool thread and the worker. On a socket, the event loop
reads the connection itself (``listener``): there is no stdin reader.

Each entry says what runs there, why it is separate, and what may block it.

- ``exportlens-stdin`` (``STDIN``, ``framing.StdinMessages``): reads and decodes
  stdin, one message each time the event loop asks. Separate: a read blocks until
  the client writes. Blocked by: a quiet client. A daemon that is never stopped: a
  client that never closes stdin cannot hold up the exit.
- the event loop (the main thread): pygls' handlers, the scheduler, publishing. It
  never blocks: whatever reads the disk or waits goes to a thread below.
- ``exportlens-lookup`` (``LOOKUPS``, one thread): a save's cache lookup
  (``runner.lookup``), the states of the project's unsaved modules (``overlays``),
  and the token comparison before a waiting store (``stores.ready_for``). Separate
  from ``io``: a save right after a result must never wait behind that result's
  hover index or re-check (docs/decisions/0013). Blocked by: a slow disk, a shared
  cache's read (bounded).
- ``exportlens-io`` (``IO``, one thread): hover indexes and hints (``indexes``), a
  result's re-check against the disk (``exports``), open modules' views, a
  ``pyproject.toml``'s problems, graph pictures, the look for a model file at
  ``initialize``. Separate from the event loop: these read files and take tens of
  ms. Blocked by: a large file's index, a large workspace's walk.
- ``exportlens-stores`` (``STORES``, one thread, so stores land in order): a
  result's store, its check and then its writing (``stores.DeferredStores``), and
  clearing the cache. Separate: with ``cacheWrite`` an upload may take seconds, and
  no lookup or index waits behind it. Blocked by: the shared cache's uploads.
- ``exportlens-verify`` (``VERIFY``, up to ``VERIFY_AT_ONCE`` threads, one per
  document): the verification of a result's fixes (``verification``), which waits
  on the workers for each candidate, up to a minute in all. Separate: on ``io`` or
  ``lookups`` it would hold them up for a job's time. Blocked by: the workers' jobs.
- ``exportlens-pool`` (``POOL``, one per started pool, ``workers.ExportBridge``):
  ``WorkerPool.serve``, which hands requests to the worker processes and their
  results and events back to the event loop. Separate: it waits on the workers'
  pipes. Blocked by: nothing of the server's.
- ``exportlens-pool-close`` (``POOL_CLOSE``, one per close): joining a pool's thread
  and stopping its workers (a settings change, a failed pool, the exit), which may
  take seconds. Separate: never on the event loop. Blocked by: a worker slow to die.

Started in core, for the server (named there, listed here):

- ``exportlens-graph-pages``, and a thread per request (``core.picture.serve``,
  started by ``features.graph_view`` at the first picture): Model Explorer's pages.
- ``exportlens-store`` and ``exportlens-store-open`` (``core.cache.remote``): each
  call to a shared cache on a daemon thread of its own, waited on for a bound.
- watchdog's observer and emitters (``core.watch.Watcher``, once a result names
  folders to watch): file events, handed to the event loop.

:meth:`ServerThreads.shutdown` stops them all at the exit, in one place: first what
its owners registered (the waiting stores handed over, the workers closed, the
watcher and the page server stopped), then the executors. ``stores`` finishes what
it holds; ``io`` and ``lookups`` drop what has not started; a verification is not
waited for (its jobs are gone with the workers).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

STDIN = "exportlens-stdin"
LOOKUPS = "exportlens-lookup"
IO = "exportlens-io"
STORES = "exportlens-stores"
VERIFY = "exportlens-verify"
POOL = "exportlens-pool"
POOL_CLOSE = "exportlens-pool-close"
VERIFY_AT_ONCE = 4  # documents whose fixes are verified at once; a fifth waits

SERVER_THREADS = (STDIN, LOOKUPS, IO, STORES, VERIFY, POOL, POOL_CLOSE)  # started by ``server/``
CORE_THREADS = ("exportlens-graph-pages", "exportlens-store", "exportlens-store-open")  # by core, for it
EXECUTORS = (LOOKUPS, IO, STORES, VERIFY)  # their threads are named ``<name>_<n>``


def documented(thread: threading.Thread) -> str | None:
    """The entry above that ``thread`` is, or None: a thread nobody documented."""
    name = thread.name
    for known in (*SERVER_THREADS, *CORE_THREADS):
        if name == known or (known in EXECUTORS and name.rpartition("_")[0] == known):
            return known
    if type(thread).__module__.startswith("watchdog."):
        return "watchdog"
    if name.endswith("(process_request_thread)"):  # the page server's, per request
        return "exportlens-graph-pages"
    return None


def start(name: str, target: Callable[..., object], *args: object) -> threading.Thread:
    """Start ``target(*args)`` on a daemon thread named ``name``, one of the entries above."""
    if name not in SERVER_THREADS or name in EXECUTORS:
        raise ValueError(f"{name!r} is no thread of exportlens.server.threads")
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    thread.start()
    return thread


async def on_thread(name: str, call: Callable[..., T], *args: object) -> T:
    """``call(*args)`` on a new thread named ``name``, awaited on the event loop."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    def run() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = call(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting task
            error = e
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:
            pass  # the loop is closed: the server is exiting

    start(name, run)
    return await done


class ServerThreads:
    """The server's executors, and what stops its other threads at the exit."""

    def __init__(self) -> None:
        self.lookups = ThreadPoolExecutor(max_workers=1, thread_name_prefix=LOOKUPS)
        self.io = ThreadPoolExecutor(max_workers=1, thread_name_prefix=IO)
        self.stores = ThreadPoolExecutor(max_workers=1, thread_name_prefix=STORES)
        self.verify = ThreadPoolExecutor(max_workers=VERIFY_AT_ONCE, thread_name_prefix=VERIFY)
        self._closers: list[tuple[str, Callable[[], object]]] = []
        self.stopped = False

    def at_shutdown(self, what: str, close: Callable[[], object]) -> None:
        """Run ``close`` at :meth:`shutdown`, before the executors stop, after what
        was registered earlier."""
        self._closers.append((what, close))

    def shutdown(self) -> None:
        """Stop every thread the server runs (at the exit; once)."""
        if self.stopped:
            return
        self.stopped = True
        for what, close in self._closers:
            try:
                close()
            except Exception:  # noqa: BLE001 - the next ones must stop all the same
                log.exception("stopping %s failed", what)
        self.verify.shutdown(wait=False, cancel_futures=True)
        self.lookups.shutdown(wait=True, cancel_futures=True)
        self.io.shutdown(wait=True, cancel_futures=True)
        self.stores.shutdown(wait=True)  # every store handed over is written
