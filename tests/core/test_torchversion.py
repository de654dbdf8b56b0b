"""The installed torch's version, read from its METADATA's headers before every export:
a torch installed or replaced while the server runs is seen at its next export."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from exportlens.core import torchversion

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


def test_the_version_is_the_headers_and_nothing_of_the_description(site: Path) -> None:
    """Read by hand up to the blank line that ends the headers (importlib's parser
    reads the whole description: ~1 ms of every save for torch's): a ``Version:`` in
    the description is not taken for the version."""
    metadata = _install(site, "2.13.0") / "METADATA"
    metadata.write_text(metadata.read_text() + "Version: 9.9.9\n")
    assert torchversion._distribution_version(NAME) == "2.13.0"
    metadata.write_text(metadata.read_text().replace("Version: 2.13.0\n", ""))  # no header: as importlib reads it
    assert torchversion._distribution_version(NAME) is None


def test_problem_reads_the_installed_torch_of_this_environment() -> None:
    import importlib.metadata

    assert torchversion.installed() == importlib.metadata.version("torch")
    assert torchversion.problem() is None
