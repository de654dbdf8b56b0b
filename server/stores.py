"""Results stored off the save's path: on the stores' thread, a moment after they
were made.

Storing a result (paths made portable, encoded, written, perhaps uploaded) takes a
few milliseconds of the GIL on the stores' thread. Handed over as the result arrived,
it competed with the diagnostics going out, then with the next save's messages: a
save made as soon as the diagnostics show (a save right after an edit, a quick fix)
waited for it. So a store is split (``Pipeline.check_store``). Its check -- the keys,
whether the file or a local module changed since the lookup, the modules' texts for
comment-only edits: everything it reads from the disk, ~1 ms -- goes to the stores'
thread at once, as the whole store did, so a file saved after the result neither
keeps the result out nor gets it filed under its new bytes. Its writing waits
``DELAY_S`` on the event loop, then goes there with every store that waited with it,
in order. By then the next export, if any, runs in its job and the server is idle.

A store still waiting (or being written) is never missed by a lookup that it would
serve: a lookup of the same file from a text with the same tokens (a comment-only
edit right after the result, served from the cache with its lines moved; the same
text again) or from the file on disk hands the waiting stores over first and waits
for them (``ready_for``). A lookup of an edited text goes on once its tokens are
compared, on the lookups' thread: that store could not serve it.

Nothing is lost or reordered: ``flush`` hands every waiting store over at once --
before the cache is cleared (a store submitted before the clearing must not land
after it) and when the server stops.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor, Future
from typing import Callable

from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import FileResult
from exportlens.core.pipeline import Pipeline
from exportlens.core.source.tokens import token_key

DELAY_S = 0.1  # longer than a result's publishing plus a following save's way to its job


class DeferredStores:
    """Results waiting to be stored on ``executor`` (one thread: stores run in the
    order they were submitted)."""

    def __init__(self, executor: Executor, delay_s: float = DELAY_S) -> None:
        self.executor = executor
        self.delay_s = delay_s
        # Each store's request, and its check on the executor: the writing it returns.
        self._waiting: list[tuple[ExportRequest, Future[Callable[[], None] | None]]] = []
        self._timer: asyncio.TimerHandle | None = None
        # Those handed over, until written: a lookup they would serve waits for them too.
        self._writing: list[tuple[ExportRequest, Future[None]]] = []

    def submit(self, pipeline: Pipeline, request: ExportRequest, result: FileResult) -> None:
        """Store ``result`` for ``request`` within ``delay_s`` (sooner on ``flush`` or a
        lookup it would serve). Called on the event loop; without one running, now."""
        self._waiting.append((request, self.executor.submit(pipeline.check_store, request, result)))
        if self._timer is not None:
            return  # the first waiting store's timer takes this one too: none waits longer
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._timer = loop.call_later(self.delay_s, self.flush)

    def flush(self) -> None:
        """Hand every waiting store to the executor now, in order."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiting, self._waiting = self._waiting, []
        self._writing = [(r, f) for r, f in self._writing if not f.done()]
        for request, checked in waiting:
            self._writing.append((request, self.executor.submit(_write, checked)))  # after its check: one thread, in order

    async def ready_for(self, request: ExportRequest, comparing: Executor) -> None:
        """Before ``request``'s lookup: when a store waiting or being written could
        serve it, hand the waiting stores over and wait until they are written. The
        texts are compared on ``comparing`` (the lookups' thread), not the event loop:
        tokenizing a long file the first time takes tens of ms (~25 ms for 1,400
        lines), and the lookup after it finds those tokens memoized."""
        self._writing = [(r, f) for r, f in self._writing if not f.done()]
        same_file = [stored for stored, _ in (*self._waiting, *self._writing) if stored.path == request.path]
        if not same_file:
            return
        loop = asyncio.get_running_loop()
        if not await loop.run_in_executor(comparing, _may_serve_any, same_file, request):
            return
        self.flush()
        await loop.run_in_executor(self.executor, _written)

    @property
    def waiting(self) -> int:
        return len(self._waiting)


def _write(checked: Future[Callable[[], None] | None]) -> None:
    write = checked.result()  # done: it ran before this on the same thread (it never raises)
    if write is not None:
        write()


def _written() -> None:
    """Runs on the stores' thread after every store handed over before it."""


def _may_serve_any(stored: list[ExportRequest], asked: ExportRequest) -> bool:
    """Whether the result stored for one of ``stored`` (requests for ``asked``'s file)
    may be what a lookup of ``asked`` finds: the same tokens (or a text read from the
    disk, which only the cache's key can compare)."""
    if asked.source is None or any(s.source is None or s.source == asked.source for s in stored):
        return True
    theirs = token_key(asked.source.encode("utf-8", "surrogatepass"))
    return theirs is not None and any(token_key(s.source.encode("utf-8", "surrogatepass")) == theirs for s in stored if s.source is not None)
