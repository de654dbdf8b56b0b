"""The installed torch's version, read from its metadata before every export: a torch
installed or replaced while the server runs is seen at its next export; a METADATA
whose metadata is old enough to vouch for it is not parsed again."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from exportlens.core import torchversion
from exportlens.core.disk import states

NAME = "exportlens-probe-dist"


def _install(site: Path, version: str) -> Path:
    """A distribution as pip leaves one: its dist-info folder with a METADATA."""
    folder = site / f"exportlens_probe_dist-{version}.dist-info"
    folder.mkdir()
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\n\n" + "A long description.\n" * 200)
    return folder


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.setattr(torchversion, "_versions", {})
    return tmp_path


def test_a_distribution_replaced_or_rewritten_is_seen_at_the_next_look(site: Path) -> None:
    first = _install(site, "2.13.0")
    assert torchversion._distribution_version(NAME) == "2.13.0"
    assert torchversion._distribution_version(NAME) == "2.13.0"
    shutil.rmtree(first)  # pip install --upgrade: the old folder goes, a new one comes
    second = _install(site, "2.14.0")
    assert torchversion._distribution_version(NAME) == "2.14.0"
    (second / "METADATA").write_text((second / "METADATA").read_text().replace("2.14.0", "2.14.1"))  # rewritten in place
    assert torchversion._distribution_version(NAME) == "2.14.1"
    shutil.rmtree(second)
    assert torchversion._distribution_version(NAME) is None


def _stat_as(monkeypatch: pytest.MonkeyPatch, metadata: Path, times_ns: int) -> None:
    st = os.stat(metadata)
    aged = SimpleNamespace(st_dev=st.st_dev, st_ino=st.st_ino, st_size=st.st_size, st_mtime_ns=times_ns, st_ctime_ns=times_ns)
    real_stat = os.stat
    monkeypatch.setattr(torchversion.os, "stat", lambda path, *args, **kw: aged if str(path) == str(metadata) else real_stat(path, *args, **kw))


def test_metadata_vouches_for_the_version_only_once_it_is_older_than_the_clocks_granularity(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stat is made to say the same thing before and after a rewrite of the METADATA:
    with recent times (a coarse clock's tick) the version is read again; with old ones
    the remembered version stands, unparsed (the saving: ~1 ms of every save)."""
    metadata = _install(site, "2.13.0") / "METADATA"
    _stat_as(monkeypatch, metadata, time.time_ns())
    assert torchversion._distribution_version(NAME) == "2.13.0"
    metadata.write_text(metadata.read_text().replace("2.13.0", "2.13.9"))  # same size, same frozen metadata
    assert torchversion._distribution_version(NAME) == "2.13.9"

    _stat_as(monkeypatch, metadata, time.time_ns() - 10 * states.RACY_NS)
    assert torchversion._distribution_version(NAME) == "2.13.9"  # read, and remembered
    metadata.write_text(metadata.read_text().replace("2.13.9", "2.13.8"))
    assert torchversion._distribution_version(NAME) == "2.13.9"  # the metadata vouches: not parsed again


def test_problem_reads_the_installed_torch_of_this_environment() -> None:
    import importlib.metadata

    assert torchversion.installed() == importlib.metadata.version("torch")
    assert torchversion.installed() == importlib.metadata.version("torch")  # from the memo, as it was read
    assert torchversion.problem() is None
