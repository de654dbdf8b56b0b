"""The result cache's shared tier against a real S3-protocol server on loopback
(``tests/s3server.py``): results found from another checkout at another path, what
a store serves read as hostile bytes, and a store that is down or hangs costing one
bounded wait."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exportlens.core.cache import remote as remote_module
from exportlens.core.cache.remote import LOOKUP_BOUND_S, RemoteStore, sign
from exportlens.core.cache.store import ResultCache
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.model.results import Diagnostic, FileResult, Related, TargetResult
from exportlens.core.model.signature import SourceLine
from tests import s3server

SECRET = b"team secret"
MODEL = "import torch\nfrom helpers import WIDTH\nmodel = torch.nn.Linear(WIDTH, 4)\nexample_args = (torch.randn(2, WIDTH),)\n"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3server.S3Server]:
    server = s3server.start(tmp_path_factory.mktemp("moto") / "moto.log")
    yield server
    server.stop()


@pytest.fixture
def as_user(s3: s3server.S3Server, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Point this process's AWS settings at the server as a user."""

    def use(user: str) -> None:
        for name, value in s3.env(user).items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("AWS_PROFILE", raising=False)

    return use


def checkout(folder: Path) -> Path:
    """A project: a model importing a local helper."""
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 30\n")
    (folder / "helpers.py").write_text("WIDTH = 4\n")
    (folder / "model.py").write_text(MODEL)
    return folder


def request(root: Path) -> ExportRequest:
    return ExportRequest(id=0, path=str(root / "model.py"), root=str(root), limits=Limits(30.0, 2048))


def result(root: Path) -> FileResult:
    """What an export of ``root``'s model says: paths of the checkout in its fields and its text."""
    model, helpers = str(root / "model.py"), str(root / "helpers.py")
    trace = f'File "{model}", line 3, in <module>\n  File "{helpers}", line 1'
    diag = Diagnostic("mutation/buffer", f"the program mutates a buffer\n{trace}", 3, 1, 3, 9, "model", related=(Related(helpers, 1, "WIDTH is set here"),))
    target = TargetResult("model", 3, "ok", 812.5, graph=f"# File: {model}:3 in forward", module_class=SourceLine(1, 1, path=helpers))
    state = hashlib.sha256((root / "helpers.py").read_bytes()).hexdigest()
    return FileResult(model, (diag,), (target,), (helpers,), f"printed from {model}", 900.0, local_import_hashes=(state,))


def cache(folder: Path, url: str, *, write: bool = False, secret: bytes | None = SECRET) -> ResultCache:
    return ResultCache(folder, remote=RemoteStore(url, write=write, secret=secret))


def stored_objects(s3: s3server.S3Server, prefix: str) -> list[str]:
    listed = s3.client().list_objects_v2(Bucket=s3server.BUCKET, Prefix=prefix + "/")
    return sorted(o["Key"] for o in listed.get("Contents", []))


def test_a_result_made_in_one_checkout_is_found_from_another(s3: s3server.S3Server, as_user: Any, tmp_path: Path) -> None:
    url = f"s3://{s3server.BUCKET}/share"
    a, b = checkout(tmp_path / "alice" / "proj"), checkout(tmp_path / "ci-runner" / "work" / "proj")
    as_user("ci")
    writer = cache(tmp_path / "cache-a", url, write=True)
    assert writer.lookup(request(a)) is None
    writer.store(request(a), result(a))
    names = stored_objects(s3, "share")
    assert [n.rsplit(".", 1)[1] for n in names].count("entry") == 1
    for name in names:  # nothing of the writer's machine in what it shared
        body = s3.client().get_object(Bucket=s3server.BUCKET, Key=name)["Body"].read()
        assert str(a).encode() not in body and str(tmp_path).encode() not in body, name

    as_user("dev")  # another user who may only read, another folder, an empty local cache
    reader = cache(tmp_path / "cache-b", url)
    found, from_store = reader.find(request(b))
    assert from_store and found is not None
    assert found == dataclasses.replace(result(b), path=found.path)  # every path is b's
    assert found.path == str(b / "model.py")
    assert list((tmp_path / "cache-b").glob("??/*.entry"))  # kept in the folder
    again, from_store = reader.find(request(b))
    assert again == found and not from_store  # the next lookup is the folder's

    # The other way: b's edit exported by a writer there, found from a.
    for root in (a, b):
        (root / "helpers.py").write_text("WIDTH = 8\n")
    as_user("ci")
    cache(tmp_path / "cache-b2", url, write=True).store(request(b), result(b))
    as_user("dev")
    found, from_store = cache(tmp_path / "cache-a2", url).find(request(a))
    assert from_store and found is not None and found.path == str(a / "model.py")
    assert found.local_imports == (str(a / "helpers.py"),)


def test_a_reader_cannot_write_and_says_so_once(s3: s3server.S3Server, as_user: Any, tmp_path: Path) -> None:
    url = f"s3://{s3server.BUCKET}/readonly"
    root = checkout(tmp_path / "proj")
    as_user("dev")
    said: list[str] = []
    store = RemoteStore(url, write=True, secret=SECRET, warn=said.append)
    local = ResultCache(tmp_path / "cache", remote=store)
    local.store(request(root), result(root))
    assert local.lookup(request(root)) is not None  # the folder kept it all the same
    (root / "helpers.py").write_text("WIDTH = 5\n")
    local.store(request(root), result(root))
    assert stored_objects(s3, "readonly") == []
    assert len(said) == 1 and "cannot write to the shared cache" in said[0], said
    assert store.status()["write"] is False


def _shared_entry(s3: s3server.S3Server, prefix: str, tmp_path: Path, root: Path, secret: bytes | None = SECRET) -> str:
    """Store ``root``'s result through a writer of ``prefix``; the entry's object name."""
    url = f"s3://{s3server.BUCKET}/{prefix}"
    cache(tmp_path / f"writer-{prefix}", url, write=True, secret=secret).store(request(root), result(root))
    (entry,) = [n for n in stored_objects(s3, prefix) if n.endswith(".entry")]
    return entry


def _tamper(data: bytes) -> bytes:
    i = len(data) // 2
    return data[:i] + bytes([data[i] ^ 1]) + data[i + 1 :]


HOSTILE = {
    # A bit flipped in the payload, its signature kept: the signature does not hold.
    "tampered": (lambda data, name: _tamper(data), "bad signature"),
    # Cut short, the signature recomputed as someone with the secret would: the header's length does not hold.
    "truncated": (lambda data, name: sign(SECRET, name, data[: -(6 + 32)][:-100]), "truncated"),
    # Written by someone without the secret.
    "unsigned": (lambda data, name: data[: -(6 + 32)], "unsigned"),
    # Signed with another secret.
    "other secret": (lambda data, name: sign(b"not the team's", name, data[: -(6 + 32)]), "bad signature"),
    # Larger than any cache file may be (the bound is made small here, the logic is the same).
    "oversized": (lambda data, name: data + b"\0" * 4096, "over"),
}


@pytest.mark.parametrize("how", list(HOSTILE))
def test_hostile_entries_are_ignored_with_a_reason(how: str, s3: s3server.S3Server, as_user: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = "hostile-" + how.replace(" ", "-")
    root = checkout(tmp_path / "proj")
    as_user("ci")
    name = _shared_entry(s3, prefix, tmp_path, root)
    client = s3.client()
    data = client.get_object(Bucket=s3server.BUCKET, Key=name)["Body"].read()
    change, reason = HOSTILE[how]
    object_name = name.split("/", 1)[1]  # the name within the store's prefix, as signed
    client.put_object(Bucket=s3server.BUCKET, Key=name, Body=change(data, object_name))
    if how == "oversized":
        monkeypatch.setattr(remote_module, "MAX_OBJECT_BYTES", len(data) + 100)
    as_user("dev")
    reader = cache(tmp_path / "reader", f"s3://{s3server.BUCKET}/{prefix}")
    with caplog.at_level(logging.WARNING, logger="exportlens.cache"):
        assert reader.find(request(root)) == (None, False)
    said = [r.getMessage() for r in caplog.records if "from the shared cache" in r.getMessage()]
    assert len(said) == 1 and reason in said[0] and name.split("/", 1)[1] in said[0], said
    assert not list((tmp_path / "reader").glob("??/*.entry"))  # nothing hostile kept
    assert reader.remote is not None and reader.remote.available  # a bad object is not a store that failed


def test_without_a_secret_a_signed_entry_is_read(s3: s3server.S3Server, as_user: Any, tmp_path: Path) -> None:
    root = checkout(tmp_path / "proj")
    as_user("ci")
    _shared_entry(s3, "signed-open", tmp_path, root)
    as_user("dev")
    found, from_store = cache(tmp_path / "reader", f"s3://{s3server.BUCKET}/signed-open", secret=None).find(request(root))
    assert from_store and found is not None


def test_a_stopped_store_costs_one_bounded_wait(as_user: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    held, stopped = s3server.refused_port()  # a store that stopped: nothing listens there
    root = checkout(tmp_path / "proj")
    as_user("dev")
    monkeypatch.delenv("EXPORTLENS_STORE_LOOKUP_S")  # the default bound, which this is about
    monkeypatch.setenv("AWS_ENDPOINT_URL", stopped)
    said: list[str] = []
    local = ResultCache(tmp_path / "cache", remote=RemoteStore(f"s3://{s3server.BUCKET}/x", secret=SECRET, warn=said.append))
    with held:
        started = time.monotonic()
        assert local.find(request(root)) == (None, False)
        first = time.monotonic() - started
        started = time.monotonic()
        for _ in range(3):
            assert local.find(request(root)) == (None, False)
        later = time.monotonic() - started
    assert first < LOOKUP_BOUND_S + 8.0  # the bound, and a loaded machine's slack (a test beside it may run CPU hogs)
    assert later < LOOKUP_BOUND_S  # left alone after it failed: no wait at all
    assert len(said) == 1 and "failed" in said[0], said
    assert local.remote is not None and not local.remote.available


def test_a_store_that_never_answers_costs_one_bounded_wait(as_user: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    silent, url = s3server.silent_port()
    try:
        root = checkout(tmp_path / "proj")
        as_user("dev")
        monkeypatch.delenv("EXPORTLENS_STORE_LOOKUP_S")  # the default bound, which this is about
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        said: list[str] = []
        local = ResultCache(tmp_path / "cache", remote=RemoteStore(f"s3://{s3server.BUCKET}/x", secret=SECRET, warn=said.append))
        started = time.monotonic()
        assert local.find(request(root)) == (None, False)
        assert time.monotonic() - started < LOOKUP_BOUND_S + 8.0
        started = time.monotonic()
        assert local.find(request(root)) == (None, False)
        assert time.monotonic() - started < LOOKUP_BOUND_S
        assert len(said) == 1 and "failed" in said[0], said
    finally:
        silent.close()


def test_a_slow_store_may_be_given_longer(as_user: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``$EXPORTLENS_STORE_LOOKUP_S``: a lookup waits that long for a store that does not
    answer (a lower bound on time, which no load can break); nonsense is the default."""
    for text, bound in (("6", 6.0), ("0", LOOKUP_BOUND_S), ("-1", LOOKUP_BOUND_S), ("soon", LOOKUP_BOUND_S), ("1e9", LOOKUP_BOUND_S)):
        monkeypatch.setenv("EXPORTLENS_STORE_LOOKUP_S", text)
        assert remote_module.lookup_bound_s() == bound, text
    silent, url = s3server.silent_port()
    try:
        root = checkout(tmp_path / "proj")
        as_user("dev")
        monkeypatch.setenv("EXPORTLENS_STORE_LOOKUP_S", "6")
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        local = ResultCache(tmp_path / "cache", remote=RemoteStore(f"s3://{s3server.BUCKET}/x", secret=SECRET, warn=lambda _: None))
        started = time.monotonic()
        assert local.find(request(root)) == (None, False)
        assert time.monotonic() - started > 5.5
    finally:
        silent.close()


def test_a_file_url_shares_a_folder(tmp_path: Path) -> None:
    a, b = checkout(tmp_path / "a"), checkout(tmp_path / "elsewhere" / "b")
    url = (tmp_path / "shared").as_uri()
    assert ResultCache(tmp_path / "ca", remote=RemoteStore(url)).lookup(request(a)) is None  # no folder yet: a miss, not a failure
    ResultCache(tmp_path / "ca", remote=RemoteStore(url, write=True)).store(request(a), result(a))
    found, from_store = ResultCache(tmp_path / "cb", remote=RemoteStore(url)).find(request(b))
    assert from_store and found is not None and found.path == str(b / "model.py")
    shutil.rmtree(tmp_path / "shared")


def test_a_slow_client_opening_is_no_store_that_does_not_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening the client (importing obstore and boto3, cold, on a loaded machine) can
    take longer than a lookup's bound: it happens once, outside the bound, and the
    store is not taken for one that failed (which would be left alone for minutes)."""
    a = checkout(tmp_path / "a")
    url = (tmp_path / "shared").as_uri()
    ResultCache(tmp_path / "ca", remote=RemoteStore(url, write=True)).store(request(a), result(a))
    opened = remote_module._open

    def slow_open(url: str, purpose: str) -> Any:
        time.sleep(LOOKUP_BOUND_S + 1.0)
        return opened(url, purpose)

    monkeypatch.setattr(remote_module, "_open", slow_open)
    said: list[str] = []
    store = RemoteStore(url, warn=said.append)
    found, from_store = ResultCache(tmp_path / "cb", remote=store).find(request(a))
    assert from_store and found is not None, said
    assert said == [] and store.available and store.problem is None


def test_credentials_and_region_from_an_aws_profile(s3: s3server.S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No key in the environment: the profile ``~/.aws`` names, read as the SDKs read it."""
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    key, secret = s3.keys["ci"]
    (home / ".aws" / "credentials").write_text(f"[team-ci]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n")
    (home / ".aws" / "config").write_text("[profile team-ci]\nregion = us-east-1\n")
    monkeypatch.setenv("HOME", str(home))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_PROFILE", "team-ci")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.url)
    store = RemoteStore(f"s3://{s3server.BUCKET}/profile", write=True, secret=SECRET)
    assert store.put("ab/abcd.entry", b"bytes")
    assert store.get("ab/abcd.entry") == b"bytes"
    assert store.problem is None


def test_a_large_entry_is_read_while_it_keeps_coming_and_a_stalled_one_fails(as_user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound is on the store's answer: an entry sent at a slow pace past the bound
    is read, one whose bytes stop coming is a failure."""
    as_user("dev")
    monkeypatch.delenv("EXPORTLENS_STORE_LOOKUP_S")  # the default bound, which this is about
    body = bytes(range(256)) * 4096  # 1 MiB
    paced, url = s3server.paced_server(body, pause_s=0.4, chunks=8)  # ~3 s in all, never 2 s silent
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        said: list[str] = []
        store = RemoteStore(f"s3://{s3server.BUCKET}/x", warn=said.append)
        assert store.get("ab/abcd.entry") == body
        assert said == [] and store.available
    finally:
        paced.shutdown()  # type: ignore[attr-defined]
    stalled, url = s3server.paced_server(body, pause_s=0.1, chunks=8, stop_after=2)
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        said = []
        store = RemoteStore(f"s3://{s3server.BUCKET}/x", warn=said.append)
        started = time.monotonic()
        assert store.get("ab/abcd.entry") is None
        assert time.monotonic() - started < 2 * remote_module.STALL_S + 3.0
        assert len(said) == 1 and "stopped coming" in said[0] and not store.available, said
    finally:
        stalled.shutdown()  # type: ignore[attr-defined]
