"""Debounce, cancellation and stale-generation checks, without LSP or workers."""

from __future__ import annotations

import asyncio

import pytest

from exportlens.server.scheduler import Scheduler


class Runs:
    """A fake export: records starts, waits until released, records what it may publish."""

    def __init__(self) -> None:
        self.started: list[tuple[str, int]] = []
        self.cancelled: list[tuple[str, int]] = []
        self.published: list[tuple[str, int]] = []
        self.release = asyncio.Event()
        self.scheduler: Scheduler | None = None
        self.started_event = asyncio.Event()
        self.cancelled_event = asyncio.Event()

    async def run(self, key: str, generation: int) -> None:
        self.started.append((key, generation))
        self.started_event.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.append((key, generation))
            self.cancelled_event.set()
            raise
        assert self.scheduler is not None
        if self.scheduler.is_latest(key, generation):
            self.published.append((key, generation))


def make(debounce_s: float) -> tuple[Scheduler, Runs]:
    runs = Runs()
    scheduler = Scheduler(runs.run, debounce_s=debounce_s)
    runs.scheduler = scheduler
    return scheduler, runs


async def test_a_burst_of_changes_runs_once_for_the_last() -> None:
    scheduler, runs = make(debounce_s=0.05)
    for _ in range(50):
        last = scheduler.schedule("a", delay=True)
    runs.release.set()
    await scheduler.settled("a")
    assert runs.started == [("a", last)] and runs.published == [("a", last)]
    assert last == 50 and not scheduler.busy("a")


async def test_a_newer_schedule_cancels_the_running_export() -> None:
    scheduler, runs = make(debounce_s=0)
    first = scheduler.schedule("a", delay=False)
    await runs.started_event.wait()
    second = scheduler.schedule("a", delay=False)
    await runs.cancelled_event.wait()
    runs.release.set()
    await scheduler.settled("a")
    assert runs.cancelled == [("a", first)]
    assert runs.published == [("a", second)]


async def test_forget_cancels_and_makes_late_results_stale() -> None:
    scheduler, runs = make(debounce_s=0)
    generation = scheduler.schedule("a", delay=False)
    await runs.started_event.wait()
    scheduler.forget("a")
    await runs.cancelled_event.wait()
    runs.release.set()
    await scheduler.settled("a")
    assert runs.cancelled == [("a", generation)] and runs.published == []
    assert not scheduler.is_latest("a", generation)


async def test_expedite_runs_a_waiting_debounce_now_but_leaves_a_running_export() -> None:
    scheduler, runs = make(debounce_s=3600)  # would never fire on its own in this test
    scheduler.schedule("a", delay=True)
    assert scheduler.expedite("a")
    await runs.started_event.wait()
    assert not scheduler.expedite("a")  # running now: a save does not restart it
    runs.release.set()
    await scheduler.settled("a")
    assert len(runs.started) == 1 and runs.published == runs.started


async def test_documents_are_independent() -> None:
    scheduler, runs = make(debounce_s=0)
    a = scheduler.schedule("a", delay=False)
    b = scheduler.schedule("b", delay=False)
    runs.release.set()
    await scheduler.settled("a")
    await scheduler.settled("b")
    assert sorted(runs.published) == [("a", a), ("b", b)]


async def test_a_failing_export_is_reported_and_the_next_one_runs() -> None:
    errors: list[tuple[str, BaseException]] = []
    calls: list[int] = []

    async def run(key: str, generation: int) -> None:
        calls.append(generation)
        if generation == 1:
            raise RuntimeError("boom")

    scheduler = Scheduler(run, debounce_s=0, on_error=lambda k, e: errors.append((k, e)))
    scheduler.schedule("a", delay=False)
    await scheduler.settled("a")
    scheduler.schedule("a", delay=False)
    await scheduler.settled("a")
    assert calls == [1, 2]
    assert [(k, str(e)) for k, e in errors] == [("a", "boom")]


@pytest.fixture(autouse=True)
def _asyncio_mode() -> None:
    """Tests here are plain coroutines run by pytest-asyncio (see the marker below)."""


pytestmark = pytest.mark.asyncio
