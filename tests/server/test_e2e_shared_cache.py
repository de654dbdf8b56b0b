"""The language server with a shared cache on a real S3-protocol server (moto_server on
loopback, ``tests/s3server.py``): a file CI checked in another checkout opens without
an export, the editor writes nothing unless told to (``cacheWrite``), what it writes
when told is found by ``check`` in the other checkout, and a store that is down is
said once in the log and the status while the file is exported as usual."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import s3server
from tests.conftest import run_cli
from tests.server.lsp_client import EXAMPLES, Doc, codes, running_server

pytestmark = pytest.mark.asyncio

URL = f"s3://{s3server.BUCKET}/editor"
SECRET = {"EXPORTLENS_CACHE_SECRET": "the team's secret"}


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3server.S3Server]:
    server = s3server.start(tmp_path_factory.mktemp("moto") / "moto.log")
    yield server
    server.stop()


def _checkout(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 60\n")
    shutil.copy(EXAMPLES / "counter.py", folder / "counter.py")
    return folder


def _entries(s3: s3server.S3Server) -> int:
    listed = s3.client().list_objects_v2(Bucket=s3server.BUCKET, Prefix="editor/").get("Contents", [])
    return sum(o["Key"].endswith(".entry") for o in listed)


async def test_the_editor_reads_what_ci_shared_and_writes_only_when_told(s3: s3server.S3Server, tmp_path: Path) -> None:
    a, b = _checkout(tmp_path / "ci" / "proj"), _checkout(tmp_path / "laptop" / "code" / "proj")
    ci = {**s3.env("ci"), **SECRET}
    proc = run_cli("check", "--format", "json", "--cache-dir", str(tmp_path / "cache-a"), "--cache-url", URL, "--cache-write", cwd=a, env=ci)
    assert proc.returncode == 0, proc.stderr
    exported = json.loads(proc.stdout)
    assert _entries(s3) == 1

    # The editor in the other checkout, with credentials that could write: it only reads.
    options = {"cache_dir": str(tmp_path / "cache-b"), "cacheUrl": URL}
    async with running_server("neovim", b, options, env=ci) as (client, _):
        doc = Doc(client, b / "counter.py")
        doc.open()
        diagnostics = await client.diagnostics_for(doc.uri, 1)
        assert [d.code for d in diagnostics] == [d["code"] for d in exported["files"][0]["diagnostics"]]
        status = await client.command("exportlens.status", doc.uri)
        assert status["cached"] is True and status["from_store"] is True, status
        assert status["store"] == [{"url": URL, "write": False, "signed": True, "available": True, "problem": None}]
        assert client.progress_reports == {}  # no export ran
        # A change saved and exported in the editor stays on this machine.
        edited = doc.replace("add_(1)", "add_(2)")
        doc.save()
        await client.diagnostics_for(doc.uri, edited)
        status = await client.command("exportlens.status", doc.uri)
        assert status["cached"] is False and status["from_store"] is False
    assert _entries(s3) == 1

    # Told to write (cacheWrite), a fresh cache folder: the saved change goes to the store...
    options = {"cache_dir": str(tmp_path / "cache-b2"), "cacheUrl": URL, "cacheWrite": True}
    async with running_server("neovim", b, options, env=ci) as (client, _):
        doc = Doc(client, b / "counter.py")
        doc.open()
        mine = codes(await client.diagnostics_for(doc.uri, 1))
    assert _entries(s3) == 2  # the server has exited, so its io thread finished the store
    # ... where check finds it from the first checkout, as a reader.
    (a / "counter.py").write_text((b / "counter.py").read_text())
    proc = run_cli("check", "--format", "json", "--cache-dir", str(tmp_path / "cache-a"), "--cache-url", URL, cwd=a, env={**s3.env("dev"), **SECRET})
    assert proc.returncode == 0, proc.stderr
    (found,) = json.loads(proc.stdout)["files"]
    assert found["from"] == "store"
    assert [(d["code"], d["line"] - 1) for d in found["diagnostics"]] == mine


async def test_a_store_that_is_down_is_said_once_in_the_log_and_the_status(tmp_path: Path) -> None:
    project = _checkout(tmp_path / "proj")
    shutil.copy(EXAMPLES / "clean.py", project / "clean.py")
    held, down = s3server.refused_port()  # nothing listens there
    env = {"AWS_ENDPOINT_URL": down, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_REGION": "us-east-1"}
    options = {"cache_dir": str(tmp_path / "cache"), "cacheUrl": URL}
    with held:
        async with running_server("neovim", project, options, env=env) as (client, _):
            first, second = Doc(client, project / "counter.py"), Doc(client, project / "clean.py")
            first.open()
            await client.diagnostics_for(first.uri, 1)  # exported all the same
            second.open()
            await client.diagnostics_for(second.uri, 1)
            status = await client.command("exportlens.status", second.uri)
            (store,) = status["store"]
            assert store["available"] is False and "failed" in store["problem"], status
            said = [m.message for m in client.log_messages if "shared cache" in m.message]
            assert len(said) == 1 and said[0].startswith("exportlens:"), said
            assert not client.messages or all("shared cache" not in m.message for m in client.messages)  # no message box
