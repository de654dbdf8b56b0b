"""The file watcher: real watchdog events, coalescing, atomic saves, polling fallback."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from exportlens.server.watch import Watcher

pytestmark = pytest.mark.asyncio


class Changes:
    def __init__(self) -> None:
        self.batches: list[set[str]] = []
        self.warnings: list[str] = []
        self.event = asyncio.Event()

    def add(self, paths: set[str]) -> None:
        self.batches.append(paths)
        self.event.set()

    async def until(self, path: Path) -> None:
        want = os.path.realpath(path)
        while not any(want in batch for batch in self.batches):
            self.event.clear()
            await asyncio.wait_for(self.event.wait(), 30)


async def test_a_burst_of_writes_is_one_batch(tmp_path: Path) -> None:
    changes = Changes()
    watcher = Watcher(asyncio.get_running_loop(), changes.add, changes.warnings.append, coalesce_s=0.3)
    try:
        watcher.watch({str(tmp_path)})
        helper = tmp_path / "helpers.py"
        for i in range(20):
            helper.write_text(f"X = {i}\n")
        (tmp_path / "notes.txt").write_text("ignored: not Python")
        await changes.until(helper)
        assert changes.batches[0] == {os.path.realpath(helper)}
        assert len(changes.batches) == 1
        assert not watcher.polling and changes.warnings == []
    finally:
        watcher.close()


async def test_an_atomic_rename_save_reports_the_target(tmp_path: Path) -> None:
    changes = Changes()
    watcher = Watcher(asyncio.get_running_loop(), changes.add, changes.warnings.append)
    try:
        helper = tmp_path / "helpers.py"
        helper.write_text("X = 1\n")
        watcher.watch({str(tmp_path)})
        temporary = tmp_path / ".helpers.py.tmp~"
        temporary.write_text("X = 2\n")
        os.replace(temporary, helper)
        await changes.until(helper)
    finally:
        watcher.close()


async def test_watched_folders_follow_the_request(tmp_path: Path) -> None:
    changes = Changes()
    watcher = Watcher(asyncio.get_running_loop(), changes.add, changes.warnings.append)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    try:
        watcher.watch({str(a), str(b), str(tmp_path / "missing")})
        assert watcher.directories == {os.path.realpath(a), os.path.realpath(b)}
        watcher.watch({str(b)})
        assert watcher.directories == {os.path.realpath(b)}
    finally:
        watcher.close()


class FailingObserver:
    """Stands in for the inotify observer when the watch limit is reached."""

    def start(self) -> None:
        raise OSError(28, "inotify watch limit reached")


async def test_falls_back_to_polling_and_says_so_once(tmp_path: Path) -> None:
    changes = Changes()
    factory: Any = FailingObserver
    watcher = Watcher(asyncio.get_running_loop(), changes.add, changes.warnings.append, observer_factory=factory)
    try:
        watcher.watch({str(tmp_path)})
        watcher.watch({str(tmp_path)})
        assert watcher.polling
        assert len(changes.warnings) == 1 and "inotify watch limit" in changes.warnings[0] and "polls" in changes.warnings[0]
        helper = tmp_path / "helpers.py"
        helper.write_text("X = 1\n")
        await changes.until(helper)  # the polling observer sees it
    finally:
        watcher.close()
