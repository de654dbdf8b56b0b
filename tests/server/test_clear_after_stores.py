"""``exportlens.clearCache`` runs after every store submitted before it: a result still
being stored when the user cleared the cache (a re-export's, which the client has seen)
must not land after the clearing and be served again."""

from __future__ import annotations

import asyncio
import inspect
import threading
from types import SimpleNamespace
from typing import Callable

from exportlens.server.app import create_server


class Cleared:
    def __init__(self, order: list[str]) -> None:
        self.order = order

    def clear(self, paths: list[str]) -> int:
        self.order.append("cleared")
        return 0


class Stored:
    def __init__(self, order: list[str]) -> None:
        self.order = order

    def check_store(self, request: object, result: object) -> Callable[[], None]:
        return lambda: self.order.append("stored")


def test_clearing_the_cache_waits_for_the_stores_before_it() -> None:
    server = create_server()
    order: list[str] = []
    server.pipeline.clear = Cleared(order).clear  # type: ignore[method-assign]
    server.documents["file:///project/model.py"] = SimpleNamespace(path="/project/model.py")  # type: ignore[assignment]
    storing = threading.Event()
    release = threading.Event()

    def store() -> None:  # a re-export's result, being written
        storing.set()
        release.wait(60)
        order.append("stored")

    server.threads.stores.submit(store)
    assert storing.wait(30)
    handler = server.protocol.fm.commands["exportlens.clearCache"]

    async def clear() -> int:
        pending = handler()
        assert inspect.isawaitable(pending)
        task = asyncio.ensure_future(pending)
        await asyncio.sleep(0.5)  # however long the store takes, the clearing waits
        assert not task.done() and order == []
        release.set()
        return int(await asyncio.wait_for(task, 30))

    try:
        assert asyncio.run(clear()) == 0
    finally:
        release.set()
    assert order == ["stored", "cleared"]


def test_a_store_still_waiting_to_start_goes_before_the_clearing() -> None:
    """A new result's store waits a moment before it goes to the stores' thread
    (``server/stores``): the clearing hands it over first, so it lands before."""
    server = create_server()
    order: list[str] = []
    server.pipeline.clear = Cleared(order).clear  # type: ignore[method-assign]
    server.documents["file:///project/model.py"] = SimpleNamespace(path="/project/model.py")  # type: ignore[assignment]
    handler = server.protocol.fm.commands["exportlens.clearCache"]

    async def store_then_clear() -> int:
        server.deferred_stores.delay_s = 60.0  # it would wait a minute
        server.deferred_stores.submit(Stored(order), SimpleNamespace(), SimpleNamespace())  # type: ignore[arg-type]
        assert server.deferred_stores.waiting == 1
        return int(await asyncio.wait_for(handler(), 30))

    assert asyncio.run(store_then_clear()) == 0
    assert order == ["stored", "cleared"]
    assert server.deferred_stores.waiting == 0
