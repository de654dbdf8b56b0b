"""The file watcher: real watchdog events, coalescing, atomic saves, polling fallback;
which changes make a result stale, and which an export made itself."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from exportlens.core.disk.states import ABSENT
from exportlens.core.model.results import FileResult
from exportlens.core.watch import Watcher, changed_since, dependency_folders, self_caused, stale_by


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


@pytest.mark.asyncio
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


@pytest.mark.asyncio
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


@pytest.mark.asyncio
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


@pytest.mark.asyncio
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


@pytest.mark.asyncio
async def test_a_dependency_that_is_not_python_is_reported(tmp_path: Path) -> None:
    changes = Changes()
    watcher = Watcher(asyncio.get_running_loop(), changes.add, changes.warnings.append)
    config, notes = tmp_path / "config.json", tmp_path / "notes.txt"
    try:
        watcher.watch({str(tmp_path)}, {os.path.realpath(config)})
        notes.write_text("not a dependency")
        config.write_text('{"width": 4}')
        await changes.until(config)
        reported = set().union(*changes.batches)
        assert os.path.realpath(notes) not in reported
        assert os.path.realpath(tmp_path) not in reported  # its "modified" event: a file in it changed
    finally:
        watcher.close()


@pytest.mark.asyncio
async def test_a_folder_that_would_hold_a_dependency_is_reported_when_it_appears(tmp_path: Path) -> None:
    """The import looked for ``pkg/__init__.py`` and there was no ``pkg/`` to watch."""
    changes = Changes()
    watcher = Watcher(asyncio.get_running_loop(), changes.add, changes.warnings.append)
    package = tmp_path / "pkg"
    try:
        watcher.watch({str(tmp_path)}, {os.path.realpath(package / "__init__.py")})
        (tmp_path / "unrelated").mkdir()
        package.mkdir()
        await changes.until(package)
        assert os.path.realpath(tmp_path / "unrelated") not in set().union(*changes.batches)
    finally:
        watcher.close()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_what_makes_a_result_stale(tmp_path: Path) -> None:
    root = str(tmp_path)
    model, helpers, config, missing_pkg = (os.path.join(root, n) for n in ("model.py", "helpers.py", "config.json", "pkg/__init__.py"))
    gen, pyproject, other = (os.path.join(root, n) for n in ("gen.py", "pyproject.toml", "other.py"))
    result = FileResult(
        model,
        local_imports=(helpers, config, missing_pkg, model),
        local_import_hashes=(_sha("X = 1"), _sha("{}"), ABSENT, _sha("m")),
        written=(gen,),
        written_hashes=(_sha("VALUE = 1"),),
    )
    assert stale_by(result, model, pyproject, {helpers, other}) == {helpers}
    assert stale_by(result, model, pyproject, {config}) == {config}  # a file it read, not Python
    assert stale_by(result, model, pyproject, {os.path.join(root, "pkg")}) == {os.path.join(root, "pkg")}  # the folder of a missing module
    assert stale_by(result, model, pyproject, {pyproject}) == {pyproject}
    assert stale_by(result, model, pyproject, {model}) == set()  # its buffer is the truth
    assert stale_by(result, model, pyproject, {gen}) == set()  # its own output, whatever it holds now
    assert stale_by(result, model, None, {other}) == set()  # another module helps no one
    assert stale_by(None, model, pyproject, {helpers, pyproject}) == {pyproject}  # no result yet


def test_a_change_is_self_caused_while_the_file_holds_what_the_export_left(tmp_path: Path) -> None:
    gen = tmp_path / "gen.py"
    gen.write_text("VALUE = 1")
    result = FileResult(str(tmp_path / "model.py"), written=(str(gen),), written_hashes=(_sha("VALUE = 1"),))
    assert self_caused({str(gen), str(tmp_path / "other.py")}, [result]) == {str(gen)}
    gen.write_text("VALUE = 2")  # someone else wrote it since
    assert self_caused({str(gen)}, [result]) == set()
    gen.unlink()
    removed = FileResult(str(tmp_path / "model.py"), written=(str(gen),), written_hashes=(ABSENT,))
    assert self_caused({str(gen)}, [removed]) == {str(gen)}


def test_a_module_run_from_its_unsaved_text_has_not_changed_since(tmp_path: Path) -> None:
    """A module the export ran from its editor text records that text's state; the
    disk's bytes differ and always will until it is saved: not a change made during
    the export (it was one, and the declaring file was exported again without end)."""
    helpers = tmp_path / "helpers.py"
    helpers.write_text("X = 1")
    model = str(tmp_path / "model.py")
    result = FileResult(model, local_imports=(str(helpers),), local_import_hashes=(_sha("X = 2  # typed"),))
    assert changed_since(result, model) == [os.path.realpath(helpers)]
    assert changed_since(result, model, [str(helpers)]) == []


def test_a_dependency_the_watcher_knew_is_left_to_its_file_event(tmp_path: Path) -> None:
    """A helper the shown result already named raises a file event when it changes,
    which exports the model again: counted here too, one restore exported it twice."""
    helpers = tmp_path / "helpers.py"
    helpers.write_text("X = 1  # restored")
    model = str(tmp_path / "model.py")
    result = FileResult(model, local_imports=(str(helpers),), local_import_hashes=(_sha("X = 2  # broken"),))
    assert changed_since(result, model, watched=[str(helpers)]) == []


def test_dependency_folders_are_the_nearest_that_exist(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    result = FileResult(str(tmp_path / "m.py"), local_imports=(str(tmp_path / "sub" / "a.py"), str(tmp_path / "pkg" / "deep" / "__init__.py")))
    assert dependency_folders(result) == {str(tmp_path / "sub"), str(tmp_path)}
