"""The pipeline CLI and server share: limits and cache-folder priority (tables), the
cache it picks for a file (the server's ``[tool.exportlens] cache_dir`` fix), and a
batch ``run`` that starts workers only for misses. No torch: the pool is a fake."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import pytest

from exportlens.core.isolation import pool as pool_module
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.model.results import Diagnostic, FileResult
from exportlens.core.pipeline import Overrides, Pipeline, cache_dir_for, cache_url_for, limits_for
from exportlens.core.project.settings import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, ProjectSettings

# (override, pyproject, expected) for each of timeout, memory and strict.
LIMITS = [
    # nothing set: the defaults
    (Overrides(), ProjectSettings(), (DEFAULT_TIMEOUT_S, DEFAULT_MEMORY_MB, False)),
    # pyproject over the defaults
    (Overrides(), ProjectSettings(timeout_s=10, memory_mb=2048, strict=True), (10.0, 2048, True)),
    # the override over pyproject, one setting at a time
    (Overrides(timeout_s=3), ProjectSettings(timeout_s=10, memory_mb=2048, strict=True), (3.0, 2048, True)),
    (Overrides(memory_mb=512), ProjectSettings(timeout_s=10, memory_mb=2048), (10.0, 512, False)),
    (Overrides(strict=False), ProjectSettings(strict=True), (DEFAULT_TIMEOUT_S, DEFAULT_MEMORY_MB, False)),
    (Overrides(strict=True), ProjectSettings(strict=False), (DEFAULT_TIMEOUT_S, DEFAULT_MEMORY_MB, True)),
    # the override over the defaults
    (Overrides(timeout_s=1.5, memory_mb=64), ProjectSettings(), (1.5, 64, False)),
]


@pytest.mark.parametrize("overrides, project, expected", LIMITS)
def test_limits_take_the_override_then_pyproject_then_the_default(overrides: Overrides, project: ProjectSettings, expected: tuple[float, int, bool]) -> None:
    limits, strict = limits_for(project, overrides)
    assert (limits.timeout_s, limits.memory_mb, strict) == expected
    assert isinstance(limits.timeout_s, float) and isinstance(limits.memory_mb, int)


# (editor/CLI folder, $EXPORTLENS_CACHE_DIR, pyproject's cache_dir, expected) with
# $XDG_CACHE_HOME set to "XDG"; every path below is under the test's folder.
CACHE_DIRS = [
    ("cli", "env", "project", "cli"),
    (None, "env", "project", "env"),
    (None, None, "project", "project"),
    (None, None, None, "XDG/exportlens"),
    (None, "env", None, "env"),
]


@pytest.mark.parametrize("override, env, project, expected", CACHE_DIRS)
def test_cache_folder_priority(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, override: str | None, env: str | None, project: str | None, expected: str) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "XDG"))
    if env is None:
        monkeypatch.delenv("EXPORTLENS_CACHE_DIR", raising=False)
    else:
        monkeypatch.setenv("EXPORTLENS_CACHE_DIR", str(tmp_path / env))
    overrides = Overrides(cache_dir=str(tmp_path / override) if override else None)
    settings = ProjectSettings(cache_dir=str(tmp_path / project) if project else None)
    assert cache_dir_for(settings, overrides) == tmp_path / expected


def test_a_relative_cache_dir_override_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert cache_dir_for(ProjectSettings(), Overrides(cache_dir="rel")) == tmp_path / "rel"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose pyproject names a cache folder; no $EXPORTLENS_CACHE_DIR (the test
    session sets one), and the user cache folder moved under the test's folder."""
    monkeypatch.delenv("EXPORTLENS_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text('[tool.exportlens]\ntimeout = 30\nmemory_mb = 1024\nstrict = true\ncache_dir = ".exportlens-cache"\n')
    for name in ("a.py", "b.py"):
        (root / name).write_text("example_args = (1,)\n")
    return root


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("??/*.entry"))


def test_a_request_takes_the_project_settings_and_root(project: Path) -> None:
    path = str(project / "a.py")
    request = Pipeline().request(path, id=7, source="example_args = (2,)\n")
    assert request == ExportRequest(id=7, path=path, source="example_args = (2,)\n", root=str(project), limits=Limits(30.0, 1024), strict_default=True)
    assert Pipeline(Overrides(timeout_s=5, strict=False)).request(path, id=1).limits.timeout_s == 5.0


def test_without_an_override_the_pyproject_cache_dir_is_used(project: Path, tmp_path: Path) -> None:
    """The server's pipeline has no override unless the editor sets cacheDir: it must
    land in the folder the CLI uses, the pyproject's (it once used the user cache)."""
    pipeline = Pipeline(Overrides(timeout_s=3))  # what an editor with a timeout setting passes
    request = pipeline.request(str(project / "a.py"), id=1)
    assert pipeline.lookup(request) is None
    pipeline.store(request, FileResult(str(project / "a.py")))
    assert len(_entries(project / ".exportlens-cache")) == 1
    assert not (tmp_path / "xdg").exists()
    assert Pipeline(Overrides(timeout_s=3)).lookup(request) == FileResult(str(project / "a.py"))


def test_one_result_cache_per_folder(project: Path, tmp_path: Path) -> None:
    pipeline = Pipeline()
    first = pipeline.cache_for(str(project / "a.py"))
    assert first is not None and first is pipeline.cache_for(str(project / "b.py"))
    other = tmp_path / "other"
    other.mkdir()
    elsewhere = pipeline.cache_for(str(other / "m.py"))  # no pyproject there: the user cache
    assert elsewhere is not None and elsewhere is not first and elsewhere.directory == tmp_path / "xdg" / "exportlens"
    # A pipeline for new editor settings shares the folders' caches.
    assert Pipeline(Overrides(timeout_s=1), caches=pipeline.caches).cache_for(str(project / "a.py")) is first


def test_the_cache_off_neither_reads_nor_writes(project: Path) -> None:
    pipeline = Pipeline(Overrides(cache=False))
    request = pipeline.request(str(project / "a.py"), id=1)
    pipeline.store(request, FileResult(request.path))
    assert pipeline.cache_for(request.path) is None and pipeline.lookup(request) is None
    assert not (project / ".exportlens-cache").exists()
    assert pipeline.clear([request.path]) == 0


def test_a_failing_cache_is_a_miss_and_one_warning(project: Path) -> None:
    heard: list[str] = []
    pipeline = Pipeline(warn=heard.append)

    def broken(*args: object, **kwargs: object) -> None:
        raise PermissionError("no access")

    pipeline.caches.get = broken  # type: ignore[assignment,method-assign]
    request = pipeline.request(str(project / "a.py"), id=1)
    assert pipeline.lookup(request) is None
    assert heard == ["the result cache is unavailable (PermissionError: no access); exporting without it"]


@pytest.mark.parametrize(
    "override, env, project, expected",
    [
        (None, None, None, None),
        (None, None, "s3://team/p", "s3://team/p"),
        (None, "gs://env/p", "s3://team/p", "gs://env/p"),
        ("file:///flag", "gs://env/p", "s3://team/p", "file:///flag"),
        ("", "gs://env/p", "s3://team/p", None),  # --cache-url '' (or the editor's ""): none
    ],
)
def test_shared_cache_url_priority(monkeypatch: pytest.MonkeyPatch, override: str | None, env: str | None, project: str | None, expected: str | None) -> None:
    if env is None:
        monkeypatch.delenv("EXPORTLENS_CACHE_URL", raising=False)
    else:
        monkeypatch.setenv("EXPORTLENS_CACHE_URL", env)
    assert cache_url_for(ProjectSettings(cache_url=project), Overrides(cache_url=override)) == expected


def test_pyproject_names_the_shared_cache_and_whether_check_writes_it(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EXPORTLENS_CACHE_URL", raising=False)
    shared = (tmp_path / "shared").as_uri()
    (project / "pyproject.toml").write_text(f'[tool.exportlens]\ncache_dir = ".exportlens-cache"\ncache_url = "{shared}"\ncache_write = true\n')
    path = str(project / "a.py")
    writer = Pipeline().cache_for(path)
    assert writer is not None and writer.remote is not None and writer.remote.url == shared and writer.remote.write
    reader = Pipeline(Overrides(cache_write=False)).cache_for(path)  # the editor: its own setting, never pyproject's
    assert reader is not None and reader.remote is not None and not reader.remote.write


def test_recorded_export_time_from_the_folder_or_the_store(project: Path, tmp_path: Path) -> None:
    """What ``check --shard`` balances by: the time stored with a file's result, found
    from another checkout through the shared cache; none once the file changed."""
    shared = (tmp_path / "shared").as_uri()
    path = str(project / "a.py")
    writer = Pipeline(Overrides(cache_url=shared, cache_write=True))
    assert writer.recorded_ms(path) is None
    writer.store(writer.request(path, id=1), FileResult(path, elapsed_ms=1234.5))
    assert writer.recorded_ms(path) == 1234.5
    other = tmp_path / "elsewhere" / "proj"
    other.parent.mkdir()
    shutil.copytree(project, other, ignore=shutil.ignore_patterns(".exportlens-cache"))
    reader = Pipeline(Overrides(cache_url=shared))
    assert reader.recorded_ms(str(other / "a.py")) == 1234.5
    cache = reader.cache_for(str(other / "a.py"))
    assert cache is not None and cache.hits == cache.misses == 0  # not counted as a lookup
    (other / "a.py").write_text("example_args = (9,)\n")
    assert reader.recorded_ms(str(other / "a.py")) is None


@dataclass
class FakePool:
    """Stands in for WorkerPool: records what it was given, answers each request."""

    jobs: int
    started: list[FakePool]
    exported: list[str]

    def __enter__(self) -> FakePool:
        self.started.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def run(self, requests: Iterable[ExportRequest]) -> Iterator[FileResult]:
        for request in reversed(list(requests)):  # out of order, as workers finish
            self.exported.append(request.path)
            yield FileResult(request.path, diagnostics=(Diagnostic("export-error", "no", 1),))


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch) -> tuple[list[FakePool], list[str]]:
    started: list[FakePool] = []
    exported: list[str] = []
    monkeypatch.setattr(pool_module, "WorkerPool", lambda jobs, **_: FakePool(jobs, started, exported))
    return started, exported


def test_run_exports_only_misses_then_serves_all_from_the_cache(project: Path, pools: tuple[list[FakePool], list[str]]) -> None:
    started, exported = pools
    paths = [str(project / "b.py"), str(project / "a.py")]
    first = Pipeline().run(paths, jobs=8)
    assert [r.path for r in first.results] == sorted(paths) and first.hits == 0
    assert len(started) == 1 and started[0].jobs == 2  # no more workers than misses
    assert len(_entries(project / ".exportlens-cache")) == 2

    (project / "b.py").write_text("example_args = (3,)\n")
    second = Pipeline().run(paths, jobs=8)
    assert [r.path for r in second.results] == sorted(paths) and second.hits == 1
    assert exported[2:] == [str(project / "b.py")] and started[1].jobs == 1

    third = Pipeline().run(paths)
    assert third.hits == 2 and len(started) == 2  # every file a hit: no pool at all
    assert third.results == second.results


def test_run_without_the_cache_exports_everything(project: Path, pools: tuple[list[FakePool], list[str]]) -> None:
    started, exported = pools
    paths = [str(project / "a.py"), str(project / "b.py")]
    Pipeline().run(paths)
    batch = Pipeline(Overrides(cache=False)).run(paths, jobs=1)
    assert batch.hits == 0 and len(started) == 2 and started[1].jobs == 1 and len(exported) == 4


def test_clear_empties_each_files_folder_once(project: Path, pools: tuple[list[FakePool], list[str]]) -> None:
    paths = [str(project / "a.py"), str(project / "b.py")]
    Pipeline().run(paths)
    assert Pipeline().clear(paths) == 2
    assert _entries(project / ".exportlens-cache") == []
    assert Pipeline().clear(paths) == 0
