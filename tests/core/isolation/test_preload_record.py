"""The preload record on its own: read as untrusted input, merged on write, private,
and a refusal that lasts only as long as the library's version. No worker, no torch."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import msgpack
import pytest

from exportlens.core.disk.states import library_state
from exportlens.core.isolation.speedups import preload_record
from exportlens.core.isolation.speedups.preload import Preloader
from exportlens.core.isolation.speedups.preload_record import Library, Record, Refusal


@pytest.fixture
def path(tmp_path: Path) -> str:
    return preload_record.path_in(tmp_path / "cache")


def _learn(modules: dict[str, list[str]]) -> object:
    def change(record: Record) -> None:
        for top, names in modules.items():
            record.libraries.setdefault(top, Library(used=preload_record.today())).modules += names

    return change


def test_written_private_and_read_back(path: str) -> None:
    preload_record.update(path, _learn({"transformers": ["transformers", "transformers.models.llama.modeling_llama"]}))  # type: ignore[arg-type]
    preload_record.refuse(path, "threadlib", "its import starts 1 thread(s)", "/x/threadlib/__init__.py", "1:2:3:4:5")
    record = preload_record.read(path)
    assert record.libraries["transformers"].modules == ["transformers", "transformers.models.llama.modeling_llama"]
    assert record.refused == {"threadlib": Refusal("its import starts 1 thread(s)", "/x/threadlib/__init__.py", "1:2:3:4:5")}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700


def test_workers_writing_in_turn_keep_what_each_learned(path: str) -> None:
    preload_record.update(path, _learn({"a": ["a", "a.x"]}))  # type: ignore[arg-type]
    preload_record.update(path, _learn({"a": ["a.y"], "b": ["b"]}))  # type: ignore[arg-type]
    record = preload_record.read(path)
    assert {n: lib.modules for n, lib in record.libraries.items()} == {"a": ["a", "a.x", "a.y"], "b": ["b"]}


def test_a_library_unused_for_weeks_is_dropped(path: str) -> None:
    def old(record: Record) -> None:
        record.libraries["old"] = Library(["old"], used=preload_record.today() - preload_record.KEEP_DAYS - 1)
        record.libraries["recent"] = Library(["recent"], used=preload_record.today() - 1)

    preload_record.update(path, old)
    assert set(preload_record.read(path).libraries) == {"recent"}


def _raw(path: str, tree: object, mode: int = 0o600) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(tree if isinstance(tree, bytes) else msgpack.packb(tree))
    os.chmod(path, mode)


GOOD = {"format": 1, "libraries": {"yaml": {"modules": ["yaml"], "used": 20000}}, "refused": {}}


@pytest.mark.parametrize(
    "tree",
    [
        b"",
        b"\xc1 not msgpack",
        b"\xdd\x7f\xff\xff\xff",  # an array declaring 2**31 items
        {"format": 2, "libraries": {}, "refused": {}},
        {"format": 1, "libraries": [], "refused": {}},
        {"format": 1, "libraries": {"os; rm -rf /": {"modules": ["x"], "used": 1}}, "refused": {}},
        {"format": 1, "libraries": {"yaml": {"modules": ["json"], "used": 1}}, "refused": {}},  # a module of another library
        {"format": 1, "libraries": {"yaml": {"modules": ["yaml..x"], "used": 1}}, "refused": {}},
        {"format": 1, "libraries": {"yaml": {"modules": "yaml", "used": 1}}, "refused": {}},
        {"format": 1, "libraries": {}, "refused": {"x": {"reason": 3}}},
    ],
    ids=repr,
)
def test_anything_but_a_record_reads_as_empty_and_is_logged(path: str, tree: object, caplog: pytest.LogCaptureFixture) -> None:
    _raw(path, tree)
    with caplog.at_level(logging.WARNING, logger="exportlens.preload"):
        assert preload_record.read(path) == Record()
    assert "ignoring the preload record" in caplog.text


@pytest.mark.parametrize("mode", [0o666, 0o620])
def test_a_record_others_may_write_is_not_trusted(path: str, mode: int) -> None:
    _raw(path, GOOD, mode)
    assert preload_record.read(path) == Record()
    os.chmod(path, 0o600)
    assert preload_record.read(path).libraries["yaml"].modules == ["yaml"]


def test_a_symlink_is_not_followed(path: str, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.msgpack"
    _raw(str(target), GOOD)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(target, path)
    assert preload_record.read(path) == Record()


@pytest.mark.needs_speedup("preloading")
def test_a_refusal_holds_for_its_version_only(path: str, tmp_path: Path) -> None:
    init = tmp_path / "site" / "threadlib" / "__init__.py"
    init.parent.mkdir(parents=True)
    init.write_text("x = 1\n")
    state = library_state(str(init))
    assert state is not None
    preload_record.refuse(path, "threadlib", "its import starts 1 thread(s)", str(init), state)
    preload_record.update(path, _learn({"yaml": ["yaml"]}))  # type: ignore[arg-type]

    worker = Preloader(path, lambda message: None)
    worker.start(0)
    assert worker.refused == {"threadlib": "its import starts 1 thread(s)"}

    staged = init.with_suffix(".new")
    staged.write_text("x = 2\n")
    os.replace(staged, init)  # another version installed
    worker = Preloader(path, lambda message: None)
    worker.start(0)
    assert worker.refused == {}
