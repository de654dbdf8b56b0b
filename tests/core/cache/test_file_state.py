"""A dependency's state: the bytes of a small file, the metadata of a large one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from exportlens.core.disk import states
from exportlens.core.disk.states import ABSENT, LARGE_FILE_BYTES, file_state


def test_a_small_file_is_known_by_its_bytes(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text('{"width": 4}')
    b.write_text('{"width": 4}')
    assert file_state(str(a)) == file_state(str(b))  # the same bytes, whatever the file
    b.write_text('{"width": 5}')
    assert file_state(str(a)) != file_state(str(b))
    assert file_state(str(tmp_path / "missing.json")) == ABSENT
    assert file_state(str(tmp_path)) is None  # a folder: not a dependency


def test_a_large_file_is_not_read_and_a_write_in_place_changes_its_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "model.safetensors"
    with open(big, "wb") as f:
        f.truncate(LARGE_FILE_BYTES * 4)  # sparse: costs no disk
    # Made an hour ago: the write below cannot share its timestamps' clock tick.
    os.utime(big, (big.stat().st_atime - 3600, big.stat().st_mtime - 3600))
    read: list[int] = []
    real_read = os.read

    def counting(fd: int, n: int) -> Any:
        data = real_read(fd, n)
        read.append(len(data))
        return data

    monkeypatch.setattr(states.os, "read", counting)
    before = file_state(str(big))
    assert before is not None and before != ABSENT
    assert sum(read) == 0
    assert file_state(str(big)) == before  # stable while nothing changes
    with open(big, "r+b") as f:  # one byte, in place: the size stays
        f.seek(123)
        f.write(b"\x01")
    assert big.stat().st_size == LARGE_FILE_BYTES * 4
    assert file_state(str(big)) != before
    small = tmp_path / "small.bin"
    small.write_bytes(b"\x00" * (LARGE_FILE_BYTES - 1))
    read.clear()
    assert file_state(str(small)) is not None and sum(read) == LARGE_FILE_BYTES - 1  # below the bound: hashed
