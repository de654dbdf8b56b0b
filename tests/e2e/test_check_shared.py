"""``exportlens check`` with a shared cache on a real S3-protocol server (moto_server
on loopback, ``tests/s3server.py``): CI's credentials write, a developer's only read,
entries are signed with the team's secret, and two checkouts at different absolute
paths share results both ways. A store that is down costs one warning, not a check."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import s3server
from tests.conftest import EXAMPLES, run_cli

URL = f"s3://{s3server.BUCKET}/e2e"
PYPROJECT = f'[tool.exportlens]\ntimeout = 60\ncache_url = "{URL}"\n'
SECRET = {"EXPORTLENS_CACHE_SECRET": "the team's secret"}


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3server.S3Server]:
    server = s3server.start(tmp_path_factory.mktemp("moto") / "moto.log")
    yield server
    server.stop()


def _checkout(folder: Path, files: tuple[str, ...] = ("clean.py", "counter.py"), pyproject: str = PYPROJECT) -> Path:
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text(pyproject)
    for name in files:
        shutil.copy(EXAMPLES / name, folder / name)
    return folder


def _check(checkout: Path, cache: Path, env: dict[str, str], *extra: str) -> tuple[dict[str, Any], str]:
    """``check --format json`` of a checkout from inside it (its paths print relative)."""
    proc = run_cli("check", "--format", "json", "--cache-dir", str(cache), *extra, cwd=checkout, env={"EXPORTLENS_CACHE_URL": None, **env})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def _origins(doc: dict[str, Any]) -> dict[str, str]:
    return {f["path"]: f["from"] for f in doc["files"]}


def _comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """The report without what differs between a run and a cached copy of it."""
    doc = json.loads(json.dumps(doc))
    for f in doc["files"]:
        f.pop("from")
        for t in f["targets"]:
            t.pop("export_ms")
    return doc


def test_two_checkouts_share_results_through_the_store_both_ways(s3: s3server.S3Server, tmp_path: Path) -> None:
    a = _checkout(tmp_path / "home" / "alice" / "src" / "proj")
    b = _checkout(tmp_path / "runner" / "_work" / "proj" / "proj")
    ci, dev = {**s3.env("ci"), **SECRET}, {**s3.env("dev"), **SECRET}

    exported, _ = _check(a, tmp_path / "cache-a", ci, "--cache-write")
    assert _origins(exported) == {"clean.py": "run", "counter.py": "run"}
    listed = s3.client().list_objects_v2(Bucket=s3server.BUCKET, Prefix="e2e/").get("Contents", [])
    assert sum(o["Key"].endswith(".entry") for o in listed) == 2

    # Another checkout at another path, another user who may only read, an empty cache folder.
    shared, stderr = _check(b, tmp_path / "cache-b", dev)
    assert _origins(shared) == {"clean.py": "store", "counter.py": "store"}, stderr
    assert _comparable(shared) == _comparable(exported)
    text = run_cli("check", "--cache-dir", str(tmp_path / "cache-b2"), cwd=b, env=dev)
    assert text.returncode == 0, text.stderr
    assert text.stdout.rstrip().splitlines()[-1].endswith("(2 files from the cache, 2 from the store)")
    again = run_cli("check", "--cache-dir", str(tmp_path / "cache-b2"), cwd=b, env=dev)
    assert again.stdout.rstrip().splitlines()[-1].endswith("(2 files from the cache)")  # kept in the folder

    # The other way: a change made in b is exported and written there, then found from a.
    for root in (a, b):
        with open(root / "counter.py", "a") as f:
            f.write("\nEXTRA_WIDTH = 3\n")
    _, _ = _check(b, tmp_path / "cache-b", ci, "--cache-write")
    found, stderr = _check(a, tmp_path / "cache-a", dev)
    assert _origins(found) == {"clean.py": "cache", "counter.py": "store"}, stderr


def test_a_reader_with_the_secret_ignores_what_was_written_without_it(s3: s3server.S3Server, tmp_path: Path) -> None:
    pyproject = PYPROJECT.replace("/e2e", "/unsigned")
    a, b = _checkout(tmp_path / "a", ("clean.py",), pyproject), _checkout(tmp_path / "b", ("clean.py",), pyproject)
    _check(a, tmp_path / "cache-a", s3.env("ci"), "--cache-write")  # no secret: unsigned entries
    doc, stderr = _check(b, tmp_path / "cache-b", {**s3.env("dev"), **SECRET})
    assert _origins(doc) == {"clean.py": "run"}  # exported again
    assert "unsigned" in stderr


def test_a_store_that_is_down_is_said_once_and_the_check_goes_on(tmp_path: Path) -> None:
    held, down = s3server.refused_port()  # nothing listens there
    project = _checkout(tmp_path / "proj", ("clean.py", "counter.py"), "[tool.exportlens]\ntimeout = 60\n")
    env = {"EXPORTLENS_CACHE_URL": URL, "AWS_ENDPOINT_URL": down, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_REGION": "us-east-1"}
    with held:
        proc = run_cli("check", "--cache-dir", str(tmp_path / "cache"), "--cache-write", cwd=project, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Checked 2 files" in proc.stdout
    said = [line for line in proc.stderr.splitlines() if "shared cache" in line]
    assert len(said) == 1 and said[0].startswith("exportlens:") and "failed" in said[0], proc.stderr
