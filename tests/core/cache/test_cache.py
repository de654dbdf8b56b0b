"""The result cache on its own: keys, hits, bad entries, concurrency, eviction.

No torch and no worker: results are built by hand, files live in tmp_path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import multiprocessing
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import msgpack
import pytest

from exportlens.core.cache import keys as cachekey
from exportlens.core.cache.entry_file import (
    HEADER,
    KIND_ENTRY,
    KIND_MANIFEST,
    KIND_TOKENS,
    MAGIC,
    encode_file,
    preload_record_name,
)
from exportlens.core.cache.keys import CACHE_FORMAT
from exportlens.core.cache.policy import cacheable
from exportlens.core.cache.portable import places_for
from exportlens.core.cache.store import ResultCache, default_cache_dir
from exportlens.core.disk.states import ABSENT, overlay_text_state, unit_state
from exportlens.core.model.plain import pack
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.model.results import Diagnostic, FileResult, TargetResult
from exportlens.core.model.signature import ArgSpec, InputSpec, OutputSpec, Signature, SourceLine, TensorMeta
from exportlens.core.source.tokens import token_key

MODEL = "from helpers import WIDTH\nimport torch\nmodel = torch.nn.Linear(8, WIDTH)\nexample_args = (torch.randn(2, 8),)\n"


@dataclasses.dataclass
class Project:
    root: Path
    model: Path
    helpers: Path

    def request(self, **changes: Any) -> ExportRequest:
        base = ExportRequest(id=0, path=str(self.model), root=str(self.root), limits=Limits(30.0, 2048))
        return dataclasses.replace(base, **changes)

    def result(self, tail: str = "", line: int = 3) -> FileResult:
        meta = TensorMeta("float32", (2, "s0"), "cpu")
        sig = Signature(
            inputs=(InputSpec("USER_INPUT", ArgSpec("tensor", "x", meta=meta), source=SourceLine(3, 5)),),
            outputs=(OutputSpec("USER_OUTPUT", ArgSpec("tensor", "linear", meta=meta)),),
            ranges={"s0": (2, None)},
        )
        target = TargetResult("Linear", line, "ok", 812.5, sig, graph="graph():\n    return (x,)")
        diag = Diagnostic("mutation/buffer", "the program mutates buffer `steps`", line, 9, line, 27, "Linear")
        return FileResult(str(self.model), (diag,), (target,), (str(self.helpers),), tail, 900.0)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 30\n")
    helpers = root / "helpers.py"
    helpers.write_text("WIDTH = 4\n")
    model = root / "model.py"
    model.write_text(MODEL)
    return Project(root, model, helpers)


@pytest.fixture
def cache(tmp_path: Path) -> ResultCache:
    return ResultCache(tmp_path / "cache")


def _files(directory: Path, suffix: str) -> list[Path]:
    return sorted(directory.glob(f"??/*{suffix}"))


# -- hits and keys -------------------------------------------------------------------


def test_a_hit_returns_an_equal_result(project: Project, cache: ResultCache) -> None:
    assert cache.lookup(project.request()) is None
    result = project.result()
    cache.store(project.request(), result)
    assert cache.lookup(project.request()) == result
    assert (cache.hits, cache.misses) == (1, 1)


def _edit_source(p: Project) -> ExportRequest:
    p.model.write_text(MODEL + "EDITED = 1\n")  # code: a comment alone keeps the result (tokens)
    return p.request()


def _edit_helper(p: Project) -> ExportRequest:
    p.helpers.write_text("WIDTH = 6\n")
    return p.request()


def _edit_pyproject_targets(p: Project) -> ExportRequest:
    (p.root / "pyproject.toml").write_text('[tool.exportlens]\ntimeout = 30\ntargets = ["model.py:make"]\n')
    return p.request()


def _version(monkeypatch: pytest.MonkeyPatch, name: str) -> Callable[[Project], ExportRequest]:
    def change(p: Project) -> ExportRequest:
        if name == "torch":
            monkeypatch.setattr(cachekey, "torch_version", lambda: "9.9.9")
        elif name == "python":
            monkeypatch.setattr(sys, "version", sys.version + " (another build)")
        else:
            monkeypatch.setattr(cachekey, "exportlens_version", lambda: "99.0")
            cachekey.code_fingerprint.cache_clear()
        return p.request()

    return change


CHANGES: dict[str, Callable[[Project], ExportRequest]] = {
    "file bytes": _edit_source,
    "editor text": lambda p: p.request(source=MODEL + "x = 1\n"),
    "local import": _edit_helper,
    "timeout": lambda p: p.request(limits=Limits(31.0, 2048)),
    "memory": lambda p: p.request(limits=Limits(30.0, 4096)),
    "strict": lambda p: p.request(strict_default=True),
    "request targets": lambda p: p.request(pyproject_targets=(f"{p.model}:make",)),
    "pyproject targets": _edit_pyproject_targets,
    "skip": lambda p: p.request(skip=("Linear",)),
    "root": lambda p: p.request(root=str(p.root.parent)),
}


@pytest.mark.parametrize("what", [*CHANGES, "torch", "python", "exportlens"])
def test_every_input_changes_the_key(what: str, project: Project, cache: ResultCache, monkeypatch: pytest.MonkeyPatch) -> None:
    cache.store(project.request(), project.result())
    assert cache.lookup(project.request()) is not None
    change = CHANGES.get(what) or _version(monkeypatch, what)
    try:
        assert cache.lookup(change(project)) is None
    finally:
        cachekey.code_fingerprint.cache_clear()


def test_editor_text_equal_to_the_file_hits(project: Project, cache: ResultCache) -> None:
    cache.store(project.request(), project.result())
    assert cache.lookup(project.request(source=MODEL)) == project.result()


def test_a_helper_edited_back_hits_again(project: Project, cache: ResultCache) -> None:
    cache.store(project.request(), project.result())
    project.helpers.write_text("WIDTH = 6\n")
    assert cache.lookup(project.request()) is None
    project.helpers.write_text("WIDTH = 4\n")
    assert cache.lookup(project.request()) == project.result()


def test_a_missing_dependency_is_a_miss(project: Project, cache: ResultCache) -> None:
    cache.store(project.request(), project.result())
    project.helpers.unlink()
    assert cache.lookup(project.request()) is None


def test_a_missing_module_the_run_looked_for_is_keyed_as_absent(project: Project, cache: ResultCache) -> None:
    """A negative dependency (ccache and bazel record them too): the run looked for
    ``extra.py`` and found nothing; creating it must miss, removing it hit again."""
    extra = project.root / "extra.py"
    helpers_sha = hashlib.sha256(project.helpers.read_bytes()).hexdigest()
    result = dataclasses.replace(project.result(), local_imports=(str(project.helpers), str(extra)), local_import_hashes=(helpers_sha, ABSENT))
    cache.store(project.request(), result)
    assert cache.lookup(project.request()) == result
    extra.write_text("WIDTH = 6\n")
    assert cache.lookup(project.request()) is None
    extra.unlink()
    assert cache.lookup(project.request()) == result


# -- installed libraries the model imported ------------------------------------------


def _install(tmp_path: Path, text: str = "WIDTH = 3\n") -> Path:
    """A library's top-level file, written anew as an installer writes it."""
    init = tmp_path / "site" / "lib" / "__init__.py"
    init.parent.mkdir(parents=True, exist_ok=True)
    staged = init.with_suffix(".new")
    staged.write_text(text)
    os.replace(staged, init)
    return init


def _using(project: Project, library: Path, state: str | None = None) -> FileResult:
    state = state or unit_state(str(library))
    assert state is not None
    return dataclasses.replace(project.result(), libraries=(str(library),), library_states=(state,))


def test_an_upgraded_library_misses_the_results_that_used_it(project: Project, cache: ResultCache, tmp_path: Path) -> None:
    library = _install(tmp_path)
    cache.store(project.request(), _using(project, library))
    assert cache.lookup(project.request()) == _using(project, library)
    _install(tmp_path, "WIDTH = 5\n")  # pip install -U lib
    assert cache.lookup(project.request()) is None
    project.model.write_text(MODEL + "# a comment: the lines would move, the library is still another\n")
    assert cache.lookup(project.request()) is None


def test_a_library_that_changed_while_the_export_ran_is_never_hit(project: Project, cache: ResultCache, tmp_path: Path) -> None:
    from exportlens.core.export.libraries import CHANGED

    library = _install(tmp_path)
    cache.store(project.request(), _using(project, library, CHANGED))
    assert cache.lookup(project.request()) is None


def test_a_removed_library_is_a_miss(project: Project, cache: ResultCache, tmp_path: Path) -> None:
    library = _install(tmp_path)
    cache.store(project.request(), _using(project, library))
    library.unlink()
    assert cache.lookup(project.request()) is None


def test_a_manifest_with_a_bad_library_list_is_a_logged_miss(project: Project, cache: ResultCache, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache.store(project.request(), _using(project, _install(tmp_path)))
    (path,) = _files(cache.directory, ".manifest")
    key = path.name.partition(".")[0]
    path.write_bytes(encode_file(KIND_MANIFEST, msgpack.packb({"key": key, "deps": [], "libs": [3]})))
    with caplog.at_level(logging.WARNING, logger="exportlens.cache"):
        assert cache.lookup(project.request()) is None
    assert cache.corrupt == 1 and "bad library list" in caplog.text


def test_a_dependency_that_cannot_be_read_now_is_a_miss(project: Project, cache: ResultCache) -> None:
    cache.store(project.request(), project.result())
    project.helpers.unlink()
    project.helpers.mkdir()  # a folder where the module was: no bytes to compare
    assert cache.lookup(project.request()) is None


@pytest.mark.adversarial
def test_a_fifo_as_the_model_file_is_a_miss_not_a_hang(project: Project, tmp_path: Path) -> None:
    fifo = project.root / "pipe.py"
    os.mkfifo(fifo)
    code = (
        "import sys\nfrom exportlens.core.cache.store import ResultCache\nfrom exportlens.core.model.request import ExportRequest\n"
        "cache = ResultCache(sys.argv[2])\nrequest = ExportRequest(id=0, path=sys.argv[1])\n"
        "assert cache.lookup(request) is None\ncache.store(request, __import__('exportlens.core.model.results', fromlist=['x']).FileResult(sys.argv[1]))\n"
    )
    try:
        proc = subprocess.run([sys.executable, "-c", code, str(fifo), str(tmp_path / "c")], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("reading a FIFO blocked the cache") from None
    assert proc.returncode == 0, proc.stderr
    assert "cannot write" not in proc.stderr  # an unreadable model is not the cache's failure


def test_an_unreadable_model_file_is_a_miss(project: Project, cache: ResultCache) -> None:
    request = project.request(path=str(project.root / "absent.py"))
    assert cache.lookup(request) is None
    cache.store(request, dataclasses.replace(project.result(), path=request.path))  # logged, not raised
    assert not _files(cache.directory, ".entry")


# -- what is not cached --------------------------------------------------------------


@pytest.mark.parametrize("code", ["timeout", "out-of-memory", "worker-crash"])
def test_machine_dependent_results_are_not_cached(code: str, project: Project, cache: ResultCache) -> None:
    result = dataclasses.replace(project.result(), diagnostics=(Diagnostic(code, "it took too long", 3),))
    assert not cacheable(result)
    cache.store(project.request(), result)
    assert cache.lookup(project.request()) is None
    assert not _files(cache.directory, ".entry")


def test_a_missing_module_is_not_cached(project: Project) -> None:
    missing = Diagnostic("import-error", "running the module raised ModuleNotFoundError: No module named 'helpers'", 1)
    other = Diagnostic("import-error", "running the module raised ValueError: invalid literal", 1)
    assert not cacheable(dataclasses.replace(project.result(), diagnostics=(missing,)))
    assert cacheable(dataclasses.replace(project.result(), diagnostics=(other,)))


def test_a_file_changed_during_the_export_is_not_stored(project: Project, cache: ResultCache) -> None:
    request = project.request()
    assert cache.lookup(request) is None  # the CLI looks up, then exports, then stores
    project.model.write_text(MODEL + "# saved while exporting\n")
    cache.store(request, project.result())
    assert not _files(cache.directory, ".entry")


def test_a_helper_changed_during_the_export_is_not_stored(project: Project, cache: ResultCache) -> None:
    request = project.request()
    assert cache.lookup(request) is None
    stamp = os.stat(project.helpers).st_mtime_ns
    project.helpers.write_text("WIDTH = 5\n")
    os.utime(project.helpers, ns=(stamp + 10**10, stamp + 10**10))  # after the lookup, whatever the clock
    cache.store(request, project.result())
    assert not _files(cache.directory, ".entry")


def test_the_entry_is_keyed_by_the_helper_bytes_the_export_read(project: Project, cache: ResultCache) -> None:
    """A helper saved between the export and the store (no lookup to compare with, as
    after a watcher event) must not get the old result filed under its new bytes."""
    read = hashlib.sha256(project.helpers.read_bytes()).hexdigest()
    result = dataclasses.replace(project.result(), local_import_hashes=(read,))
    old = project.helpers.read_text()
    project.helpers.write_text("WIDTH = 5\n")  # lands before the store
    cache.store(project.request(), result)
    assert cache.lookup(project.request()) is None  # the new bytes never ran
    project.helpers.write_text(old)
    assert cache.lookup(project.request()) == result  # the bytes that ran: a hit


def test_a_store_written_after_its_check_is_filed_under_the_files_the_export_ran(project: Project, cache: ResultCache) -> None:
    """The server checks a store as the result arrives and writes it a moment later
    (``server/stores.py``): a module edited in comments, and pyproject.toml edited, in
    between must neither keep the result out nor file it under their new bytes."""
    request = project.request()
    assert cache.lookup(request) is None
    read = hashlib.sha256(project.helpers.read_bytes()).hexdigest()
    result = dataclasses.replace(project.result(), local_import_hashes=(read,))
    checked = cache.check(request, result)
    assert checked is not None
    pyproject = project.root / "pyproject.toml"
    settings = pyproject.read_text()
    project.helpers.write_text("# the width\nWIDTH = 4\n")  # saved after the result, comments only
    pyproject.write_text(settings + "# a note\n")
    cache.write(checked)
    assert cache.lookup(project.request()) is None  # this pyproject.toml's bytes never ran
    pyproject.write_text(settings)
    moved = cache.lookup(project.request())  # the helper as it ran, its lines moved
    assert moved is not None and moved.targets == result.targets and cache.moved == 1


@pytest.mark.parametrize("recorded", [True, False], ids=["states-recorded", "no-states"])
def test_a_result_made_from_a_modules_unsaved_text_is_never_the_disks(recorded: bool, project: Project, cache: ResultCache) -> None:
    """Issue 22, point 9: the editor exports with the unsaved text of an open module;
    that result is keyed by the text it ran from (as the job records it, or as the
    request says when it recorded nothing), never by the module on disk."""
    typed = project.request(overlays=((str(project.helpers), "WIDTH = 6\n"),))
    assert cache.lookup(typed) is None
    result = project.result()
    if recorded:
        result = dataclasses.replace(result, local_import_hashes=(overlay_text_state("WIDTH = 6\n"),))
    cache.store(typed, result)
    assert cache.lookup(project.request()) is None  # the disk's helpers never ran
    assert cache.lookup(typed) == result


def test_a_comment_moved_result_is_served_unless_a_module_it_imports_is_unsaved(project: Project, cache: ResultCache) -> None:
    """Results whose lines only moved (comments) are served with an unrelated module
    open in the editor, but not when a module they import is unsaved (their lines
    would be the stored text's, not the buffer's)."""
    cache.store(project.request(), project.result())
    commented = "# a comment\n" + MODEL
    unrelated = project.request(source=commented, overlays=((str(project.root / "other.py"), "X = 1\n"),))
    moved = cache.lookup(unrelated)
    assert moved is not None and moved.diagnostics[0].line == 4 and cache.moved == 1
    imported = project.request(source=commented, overlays=((str(project.helpers), "WIDTH = 4  # typed\n"),))
    assert cache.lookup(imported) is None and cache.moved == 1


# -- bad entries ---------------------------------------------------------------------


def _reencode(data: bytes, version: int) -> bytes:
    magic, _, kind, length, digest = HEADER.unpack_from(data)
    return HEADER.pack(magic, version, kind, length, digest) + data[HEADER.size :]


def _flip(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0xFF])


def _payload(kind: int, obj: Any) -> Callable[[bytes], bytes]:
    return lambda data: encode_file(kind, obj if isinstance(obj, bytes) else msgpack.packb(obj))


BREAKERS: dict[str, Callable[[bytes], bytes]] = {
    "empty": lambda data: b"",
    "truncated": lambda data: data[: len(data) // 2],
    "header only": lambda data: data[: HEADER.size],
    "garbage": lambda data: os.urandom(len(data)),
    "other version": lambda data: _reencode(data, CACHE_FORMAT + 1),
    "flipped byte": _flip,
    "trailing bytes": lambda data: data + b"\x00",
}


def _entry_breakers(key: str) -> dict[str, Callable[[bytes], bytes]]:
    return {
        "not msgpack": _payload(KIND_ENTRY, b"\xc1"),
        "huge declared array": _payload(KIND_ENTRY, b"\xdd\x7f\xff\xff\xff"),
        "ext type": _payload(KIND_ENTRY, b"\xd4\x01\x00"),
        "wrong shape": _payload(KIND_ENTRY, {"key": key, "result": {"path": 3}}),
        "another key": _payload(KIND_ENTRY, {"key": "0" * 64, "result": {"path": "x"}}),
        "a manifest": lambda data: encode_file(KIND_MANIFEST, data[HEADER.size :]),
    }


@pytest.mark.parametrize("which", [".entry", ".manifest"])
@pytest.mark.parametrize("how", [*BREAKERS, "not msgpack", "huge declared array", "ext type", "wrong shape", "another key", "a manifest"])
def test_a_bad_file_is_a_logged_miss_then_rewritten(which: str, how: str, project: Project, cache: ResultCache, caplog: pytest.LogCaptureFixture) -> None:
    result = project.result()
    cache.store(project.request(), result)
    (path,) = _files(cache.directory, which)
    good = path.read_bytes()
    key = path.name.partition(".")[0]
    breakers = BREAKERS | _entry_breakers(key)
    if which == ".manifest" and how == "a manifest":
        breakers[how] = lambda data: encode_file(KIND_ENTRY, data[HEADER.size :])
    path.write_bytes(breakers[how](good))
    with caplog.at_level(logging.WARNING, logger="exportlens.cache"):
        assert cache.lookup(project.request()) is None
    assert cache.corrupt == 1
    assert str(path) in caplog.text
    cache.store(project.request(), result)
    assert path.read_bytes() == good
    assert cache.lookup(project.request()) == result


def test_the_header_is_what_the_reader_checks(project: Project, cache: ResultCache) -> None:
    cache.store(project.request(), project.result())
    (path,) = _files(cache.directory, ".entry")
    magic, version, kind, length, _ = HEADER.unpack_from(path.read_bytes())
    assert (magic, version, kind, length) == (MAGIC, CACHE_FORMAT, KIND_ENTRY, path.stat().st_size - HEADER.size)


# -- writing -------------------------------------------------------------------------


def test_an_unwritable_folder_logs_and_returns(project: Project, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cache = ResultCache(blocker / "cache")
    with caplog.at_level(logging.WARNING, logger="exportlens.cache"):
        cache.store(project.request(), project.result())
        cache.store(project.request(), project.result())
    assert cache.lookup(project.request()) is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "cannot write" in warnings[0].getMessage()  # once, not per file


def test_the_folder_is_private_and_its_files_too_whatever_the_umask(project: Project, tmp_path: Path) -> None:
    # Other users of a shared machine can neither read results nor plant entries.
    cache = ResultCache(tmp_path / "made" / "by" / "cache")
    old = os.umask(0)  # the most permissive: what the cache makes private, it makes so itself
    try:
        cache.store(project.request(), project.result())
        cache.store(project.request(source=MODEL + "# another\n"), project.result())
    finally:
        os.umask(old)
    assert cache.lookup(project.request()) is not None
    folders = [cache.directory, *(p for p in cache.directory.rglob("*") if p.is_dir())]
    files = [p for p in cache.directory.rglob("*") if p.is_file()]
    assert len(folders) > 1 and {p.name for p in files} >= {"CACHEDIR.TAG"} and any(p.suffix == ".entry" for p in files)
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in folders} == {"0o700"}
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {"0o600"}


def test_a_folder_that_exists_keeps_its_mode(project: Project, tmp_path: Path) -> None:
    # A folder someone made (perhaps shared on purpose) is not changed; its entries
    # are decoded as hostile bytes either way.
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o750)
    ResultCache(folder).store(project.request(), project.result())
    assert stat.S_IMODE(folder.stat().st_mode) == 0o750
    assert {stat.S_IMODE(p.stat().st_mode) for p in folder.rglob("*") if p.is_file()} == {0o600}


def test_no_temporary_files_are_left(project: Project, cache: ResultCache) -> None:
    for i in range(3):
        cache.store(project.request(source=MODEL + f"# {i}\n"), project.result())
    names = [p.name for p in cache.directory.rglob("*") if p.is_file()]
    assert names and not [n for n in names if n.startswith(".tmp")]


def _tail(pid: int) -> str:
    return f"{pid}:" * (1 << 19)  # ~3 MB: a non-atomic write would be seen half-done


def _writer(directory: str, model: str, helpers: str, n: int, go: Event) -> None:
    project = Project(Path(model).parent, Path(model), Path(helpers))
    cache = ResultCache(directory)
    big = _tail(os.getpid())
    go.wait()
    for _ in range(n):
        cache.store(project.request(), project.result(tail=big))


def _reader(directory: str, model: str, helpers: str, go: Event, stop: Event, out: Any) -> None:
    project = Project(Path(model).parent, Path(model), Path(helpers))
    cache = ResultCache(directory)
    go.wait()
    tails = set()
    while not stop.is_set():
        found = cache.lookup(project.request())
        if found is not None:
            pid = int(found.output_tail.partition(":")[0])
            tails.add(pid if found.output_tail == _tail(pid) else -1)
    out.put((cache.hits, cache.corrupt, sorted(tails)))


def test_concurrent_writers_leave_one_valid_entry_and_readers_see_whole_ones(project: Project, cache: ResultCache) -> None:
    ctx = multiprocessing.get_context("fork")
    go, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    args = (str(cache.directory), str(project.model), str(project.helpers))
    writers = [ctx.Process(target=_writer, args=(*args, 15, go)) for _ in range(4)]
    reader = ctx.Process(target=_reader, args=(*args, go, stop, out))
    for p in [*writers, reader]:
        p.start()
    go.set()
    for p in writers:
        p.join(120)
        assert p.exitcode == 0
    stop.set()
    hits, corrupt, tails = out.get(timeout=120)
    reader.join(30)
    assert corrupt == 0  # never a half-written entry
    assert hits > 0 and tails
    assert set(tails) <= {p.pid for p in writers}
    assert len(_files(cache.directory, ".entry")) == 1
    assert len(_files(cache.directory, ".manifest")) == 1
    assert not [p for p in cache.directory.rglob(".tmp*")]
    final = ResultCache(cache.directory).lookup(project.request())
    assert final is not None and final.output_tail in {_tail(p.pid) for p in writers if p.pid is not None}


# -- size bound and clear ------------------------------------------------------------


def _store_keys(project: Project, cache: ResultCache, count: int) -> list[ExportRequest]:
    # Distinct code, not comments: texts differing only in comments share a tokens manifest.
    requests = [project.request(source=MODEL + f"V{i:03} = 1\n") for i in range(count)]
    for r in requests:
        cache.store(r, project.result())
    return requests


def test_eviction_removes_least_recently_used_first(project: Project, tmp_path: Path) -> None:
    seed = ResultCache(tmp_path / "cache")
    requests = _store_keys(project, seed, 6)
    pair = seed.size() // 6
    # Distinct, old mtimes in store order: key 0 is the oldest...
    for i, r in enumerate(requests):
        key1 = cachekey.first_key(r, cachekey.source_bytes(r))
        key2 = cachekey.second_key(key1, [str(project.helpers)], places=places_for(r.root))
        assert key2 is not None
        tokens = seed._path(cachekey.token_first_key(r, token_key(cachekey.source_bytes(r)) or ""), KIND_TOKENS)
        for path in (seed._path(key1, KIND_MANIFEST), seed._path(key2, KIND_ENTRY), tokens):
            os.utime(path, ns=(10**18 + i * 10**9, 10**18 + i * 10**9))
    cache = ResultCache(tmp_path / "cache", max_bytes=int(pair * 4.5))
    assert cache.lookup(requests[0]) is not None  # ...but it was just used
    cache.store(project.request(source=MODEL + "NEW = 1\n"), project.result())
    assert cache.size() <= cache.max_bytes
    kept = [i for i, r in enumerate(requests) if ResultCache(tmp_path / "cache").lookup(r) is not None]
    assert kept == [0, 4, 5]


def test_lookups_never_scan_the_folder(project: Project, cache: ResultCache, monkeypatch: pytest.MonkeyPatch) -> None:
    requests = _store_keys(project, cache, 3)

    def scan(*args: Any) -> Any:
        raise AssertionError("scanned the folder")

    monkeypatch.setattr(ResultCache, "_files", scan)
    assert all(cache.lookup(r) is not None for r in requests)
    cache.store(project.request(source="# under the bound: no scan either\n"), project.result())


def test_clear_removes_only_cache_files(project: Project, cache: ResultCache) -> None:
    requests = _store_keys(project, cache, 3)
    (cache.directory / "notes.txt").write_text("mine")
    (cache.directory / preload_record_name("this environment")).write_bytes(b"what the workers preload")
    assert cache.clear() == 3
    assert all(cache.lookup(r) is None for r in requests)
    assert [p.name for p in cache.directory.iterdir()] == ["notes.txt"]
    assert cache.clear() == 0


# -- location ------------------------------------------------------------------------


def test_default_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EXPORTLENS_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("EXPORTLENS_CACHE_DIR")
    assert default_cache_dir() == tmp_path / "xdg" / "exportlens"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/is/ignored")
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "exportlens"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "exportlens"
    assert ResultCache().directory == default_cache_dir()


def test_importing_the_cache_does_not_import_torch() -> None:
    code = "import sys, exportlens.core.cache.store, exportlens.core.cache.keys as k; k.torch_version(); k.code_fingerprint(); assert 'torch' not in sys.modules, 'torch imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_entries_are_wire_encoded_results(project: Project, cache: ResultCache) -> None:
    # The bytes the worker sends, with the project's folder written as a token: a
    # reader of the cache needs only ``wire`` and its own root.
    cache.store(project.request(), project.result())
    (path,) = _files(cache.directory, ".entry")
    plain = msgpack.unpackb(path.read_bytes()[HEADER.size :], raw=False)
    assert pack(places_for(str(project.root)).local_plain(plain["result"])) == pack(project.result())
    for stored in _files(cache.directory, ""):  # nothing of this machine in any file
        assert str(project.root).encode() not in stored.read_bytes(), stored.name
