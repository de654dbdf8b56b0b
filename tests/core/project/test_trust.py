"""The trust record (``exportlens.core.project.trust``): where it lives, what a
folder covers, and a record that cannot be believed is no record, never a crash."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from exportlens.core.project import trust


@pytest.fixture()
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(trust.ENV, str(tmp_path / "config"))
    return tmp_path / "config" / "trusted.json"


def test_the_folder_is_exportlens_config_dir_else_xdg_else_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(trust.ENV, str(tmp_path / "explicit"))
    assert trust.record_path() == tmp_path / "explicit" / "trusted.json"
    monkeypatch.delenv(trust.ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert trust.record_path() == tmp_path / "xdg" / "exportlens" / "trusted.json"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/is/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    if sys.platform.startswith("linux"):
        assert trust.record_path() == tmp_path / "home" / ".config" / "exportlens" / "trusted.json"


def test_a_trusted_folder_covers_its_subfolders_and_nothing_beside_it(tmp_path: Path, record: Path) -> None:
    (tmp_path / "proj" / "sub").mkdir(parents=True)
    (tmp_path / "proj2").mkdir()
    assert trust.trust(tmp_path / "proj") == str(tmp_path / "proj")
    loaded = trust.load()
    assert loaded.problem is None
    assert loaded.trusts(tmp_path / "proj") and loaded.trusts(tmp_path / "proj" / "sub" / "model.py")
    assert not loaded.trusts(tmp_path / "proj2" / "model.py")  # a shared prefix is not a subfolder
    assert not loaded.trusts(tmp_path)
    assert record.stat().st_mode & 0o777 == 0o600 and record.parent.stat().st_mode & 0o777 == 0o700
    assert json.loads(record.read_text()) == {"version": 1, "folders": [str(tmp_path / "proj")]}


def test_paths_are_resolved(tmp_path: Path, record: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "escape").symlink_to(tmp_path / "outside")
    assert trust.trust(tmp_path / "link") == str(tmp_path / "real")
    loaded = trust.load()
    assert loaded.trusts(tmp_path / "link" / "m.py") and loaded.trusts(tmp_path / "real" / "m.py")
    assert not loaded.trusts(tmp_path / "real" / "escape" / "m.py")  # a link out of it is not trusted


def test_forget_removes_the_folder_and_those_inside_it(tmp_path: Path, record: Path) -> None:
    for name in ("a", "a/b", "c"):
        (tmp_path / name).mkdir()
        trust.trust(tmp_path / name)
    assert trust.forget(tmp_path / "a") == [str(tmp_path / "a"), str(tmp_path / "a" / "b")]
    assert trust.load().folders == (str(tmp_path / "c"),)
    assert trust.forget(tmp_path / "a") == []


@pytest.mark.parametrize(
    "content, mode, why",
    [
        ('{"version": 1, "folders": ["%s"]}', 0o666, "writable by other users (mode 0666)"),
        ('{"version": 1, "folders": ["%s"]}', 0o620, "writable by other users (mode 0620)"),
        ("{not json", 0o600, "not JSON"),
        ('{"version": 2, "folders": ["%s"]}', 0o600, "expected"),
        ('{"version": 1, "folders": ["relative"]}', 0o600, "absolute paths"),
        ('["%s"]', 0o600, "expected"),
        (b"\xff\xfe", 0o600, "not JSON"),
    ],
)
def test_a_record_that_cannot_be_believed_trusts_nothing(tmp_path: Path, record: Path, content: str | bytes, mode: int, why: str) -> None:
    record.parent.mkdir(mode=0o700)
    record.write_bytes(content if isinstance(content, bytes) else (content.replace("%s", str(tmp_path))).encode())
    record.chmod(mode)
    loaded = trust.load()
    assert not loaded.trusts(tmp_path / "model.py") and loaded.folders == ()
    assert loaded.problem is not None and why in loaded.problem and str(record) in loaded.problem
    with pytest.raises(trust.TrustError):
        trust.trust(tmp_path)  # never overwritten: its owner should look at it


def test_a_record_of_another_user_or_in_an_open_folder_is_ignored(tmp_path: Path, record: Path) -> None:
    record.parent.mkdir(mode=0o700)
    record.write_text(json.dumps({"version": 1, "folders": [str(tmp_path)]}))
    record.chmod(0o600)
    assert trust.load().trusts(tmp_path)
    record.parent.chmod(0o777)
    assert "its folder is writable by other users" in (trust.load().problem or "")
    record.parent.chmod(0o700)
    if os.getuid() == 0:
        os.chown(record, 12345, -1)
        assert "belongs to another user" in (trust.load().problem or "")


def test_a_record_that_is_not_a_regular_file_is_ignored(tmp_path: Path, record: Path) -> None:
    record.parent.mkdir(mode=0o700)
    os.mkfifo(record, 0o600)  # would block a plain open
    assert "not a regular file" in (trust.load().problem or "")
    os.unlink(record)
    (tmp_path / "elsewhere.json").write_text(json.dumps({"version": 1, "folders": [str(tmp_path)]}))
    record.symlink_to(tmp_path / "elsewhere.json")
    assert trust.load().problem is not None  # a link is not followed


def test_no_record_trusts_nothing_and_says_nothing(tmp_path: Path, record: Path) -> None:
    loaded = trust.load()
    assert loaded.folders == () and loaded.problem is None
