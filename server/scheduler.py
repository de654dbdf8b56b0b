"""When to export a document: debounce, cancellation and stale-result checks.

One asyncio task per document (esbonio's shape). A change schedules an export after
``debounce_s``; a save, an open or an explicit request schedules one at once. Any
new schedule cancels the document's previous task, whether it is still sleeping
or already waiting on a worker, so the runner's cancellation path must kill its job.
Each schedule gets a new *generation*; a runner may publish only while
``is_latest(key, generation)`` holds, which is how a result for an older version
(or for a buffer that changed since) is never shown.

Pure asyncio, no LSP, so it is tested on its own.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

log = logging.getLogger(__name__)

Runner = Callable[[str, int], Awaitable[None]]


class Scheduler:
    def __init__(
        self,
        run: Runner,
        debounce_s: float = 0.3,
        on_error: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self._run = run
        self.debounce_s = debounce_s
        self._on_error = on_error
        self._generation: dict[str, int] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._sleeping: set[str] = set()  # keys whose task still waits for its debounce

    def schedule(self, key: str, *, delay: bool) -> int:
        """Export ``key`` after the debounce (``delay``) or now; returns the generation."""
        generation = self._generation.get(key, 0) + 1
        self._generation[key] = generation
        self._cancel_task(key)
        wait = self.debounce_s if delay else 0.0
        if wait > 0:
            self._sleeping.add(key)
        task = asyncio.get_running_loop().create_task(self._later(key, generation, wait), name=f"export {key}#{generation}")
        self._tasks[key] = task
        task.add_done_callback(lambda t: self._finished(key, t))
        return generation

    def expedite(self, key: str) -> bool:
        """Run a debounced export of ``key`` now (a save); True when one was waiting.

        An export already running is left alone: it is for the same text.
        """
        if key not in self._sleeping:
            return False
        self.schedule(key, delay=False)
        return True

    def forget(self, key: str) -> None:
        """Stop everything for ``key`` (the document closed); late results become stale."""
        self._generation[key] = self._generation.get(key, 0) + 1
        self._cancel_task(key)

    def is_latest(self, key: str, generation: int) -> bool:
        return self._generation.get(key) == generation

    def busy(self, key: str) -> bool:
        """An export of ``key`` is waiting for its debounce or running."""
        return key in self._tasks

    async def settled(self, key: str) -> None:
        """Wait until ``key`` has no pending or running export (following reschedules)."""
        while (task := self._tasks.get(key)) is not None:
            # asyncio.wait does not raise the task's cancellation into us.
            await asyncio.wait({task})

    def cancel_all(self) -> None:
        for key in list(self._tasks):
            self.forget(key)

    def _cancel_task(self, key: str) -> None:
        self._sleeping.discard(key)
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()

    async def _later(self, key: str, generation: int, wait: float) -> None:
        if wait > 0:
            await asyncio.sleep(wait)
            if self.is_latest(key, generation):
                self._sleeping.discard(key)
        await self._run(key, generation)

    def _finished(self, key: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("export of %s failed", key, exc_info=error)
            if self._on_error is not None:
                try:
                    self._on_error(key, error)
                except Exception:  # noqa: BLE001 - reporting must not raise from a callback
                    log.exception("reporting an export failure failed")
