"""A new result is stored a moment after it arrives, off the save's path
(``server/stores.py``): in order, none waiting longer than the delay, none lost, and
none missed by a lookup it would serve."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import FileResult
from exportlens.server.stores import DeferredStores

TEXT = "import torch\n\nx = torch.ones(2)  # a comment\n"


class Recorder:
    """A pipeline whose store notes what it checked and what it wrote, and when."""

    def __init__(self) -> None:
        self.checked: list[tuple[int, float]] = []  # (request id, when)
        self.stored: list[tuple[int, float]] = []
        self.done = threading.Event()
        self.expected = 0

    def check_store(self, request: ExportRequest, result: FileResult) -> Callable[[], None]:
        self.checked.append((request.id, time.monotonic()))

        def write() -> None:
            self.stored.append((request.id, time.monotonic()))
            if len(self.stored) == self.expected:
                self.done.set()

        return write


def _request(i: int, path: str = "/p/model.py", source: str | None = TEXT) -> ExportRequest:
    return ExportRequest(id=i, path=path, source=source)


def test_stores_wait_the_delay_then_run_in_order() -> None:
    pipeline = Recorder()
    pipeline.expected = 3
    submitted: dict[int, float] = {}
    with ThreadPoolExecutor(max_workers=1) as pool:
        stores = DeferredStores(pool, 0.5)

        async def submit_all() -> None:
            for i in range(3):
                submitted[i] = time.monotonic()
                stores.submit(pipeline, _request(i), FileResult(path="/p/model.py"))  # type: ignore[arg-type]
                await asyncio.sleep(0.05)
                assert pipeline.stored == []  # nothing yet: they wait
            end = time.monotonic() + 30
            while not pipeline.done.is_set() and time.monotonic() < end:  # the timer runs on this loop
                await asyncio.sleep(0.01)

        asyncio.run(submit_all())
    assert [i for i, _ in pipeline.stored] == [0, 1, 2]
    # Each was checked at once (whether its files changed during the export, as of
    # its result), and written later.
    assert [i for i, _ in pipeline.checked] == [0, 1, 2]
    assert all(at - submitted[i] < 0.4 for i, at in pipeline.checked)
    waited = [at - submitted[i] for i, at in pipeline.stored]
    # All went with the first one's timer: the first waited about the delay, the later
    # ones less (none longer than the delay, but for a loaded machine's lateness).
    assert waited[0] >= 0.45
    assert waited[2] < waited[0] < 0.5 + 5.0


def test_a_store_submitted_without_a_running_loop_goes_at_once() -> None:
    pipeline = Recorder()
    pipeline.expected = 1
    with ThreadPoolExecutor(max_workers=1) as pool:
        stores = DeferredStores(pool, 60.0)
        stores.submit(pipeline, _request(1), FileResult(path="/p/model.py"))  # type: ignore[arg-type]
        assert stores.waiting == 0
        assert pipeline.done.wait(30)


def test_flush_hands_every_waiting_store_over_at_once() -> None:
    pipeline = Recorder()
    with ThreadPoolExecutor(max_workers=1) as pool:
        stores = DeferredStores(pool, 60.0)

        async def submit_then_flush() -> None:
            stores.submit(pipeline, _request(1), FileResult(path="/p/model.py"))  # type: ignore[arg-type]
            stores.submit(pipeline, _request(2), FileResult(path="/p/model.py"))  # type: ignore[arg-type]
            assert stores.waiting == 2
            stores.flush()
            assert stores.waiting == 0

        asyncio.run(submit_then_flush())
    # Leaving the ``with`` waited for the executor: both ran, in order, long before a minute.
    assert [i for i, _ in pipeline.stored] == [1, 2]


def test_a_lookup_a_waiting_store_would_serve_waits_for_it_and_no_other_does() -> None:
    """A comment-only edit right after the result is served from the cache: its lookup
    must find that result stored. A code edit's lookup could not be served by it, and
    does not wait."""
    pipeline = Recorder()
    with ThreadPoolExecutor(max_workers=1) as pool, ThreadPoolExecutor(max_workers=1) as comparing:
        stores = DeferredStores(pool, 60.0)

        async def lookups() -> None:
            stores.submit(pipeline, _request(1), FileResult(path="/p/model.py"))  # type: ignore[arg-type]
            for other in (
                _request(2, source=TEXT.replace("2", "3")),  # code changed
                _request(3, path="/p/other.py"),  # another file
            ):
                await stores.ready_for(other, comparing)
                assert stores.waiting == 1 and pipeline.stored == []
            for serves in (
                _request(4, source="# a new first line\n" + TEXT.replace("a comment", "another")),  # comments only
                _request(5, source=TEXT),  # the same text
                _request(6, source=None),  # the file on disk: only the key can tell
            ):
                stores.submit(pipeline, _request(1), FileResult(path="/p/model.py"))  # type: ignore[arg-type]
                count, waiting = len(pipeline.stored), stores.waiting
                await stores.ready_for(serves, comparing)
                assert stores.waiting == 0 and len(pipeline.stored) == count + waiting  # stored before the lookup goes on

        asyncio.run(lookups())
