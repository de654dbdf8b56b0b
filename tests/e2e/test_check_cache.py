"""``exportlens check`` with its result cache, through the real command.

One module-wide project of two small models is exported once into a warm cache;
each test copies that cache to a folder of its own (``--cache-dir``), so the tests
do not depend on each other's runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, ROOT, check_json, run_cli


@dataclass(frozen=True)
class Warm:
    project: Path
    cache: Path
    doc: dict[str, Any]


def _project(folder: Path) -> Path:
    folder.mkdir()
    (folder / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 60\n")
    for name in ("clean.py", "counter.py"):
        shutil.copy(EXAMPLES / name, folder / name)
    return folder


def _without_times(doc: dict[str, Any]) -> dict[str, Any]:
    for f in doc["files"]:
        for t in f["targets"]:
            t.pop("export_ms")
    return doc


def _from(doc: dict[str, Any], where: str) -> dict[str, Any]:
    """The report with each file's ``from`` checked to be ``where`` and left out."""
    doc = json.loads(json.dumps(doc))
    for f in doc["files"]:
        assert f.pop("from") == where, f["path"]
    return doc


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("??/*.entry"))


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Warm:
    base = tmp_path_factory.mktemp("cache-e2e")
    project = _project(base / "proj")
    cache = base / "warm-cache"
    code, doc = check_json(str(project), extra=("--cache-dir", str(cache)))
    assert code == 0
    assert len(_entries(cache)) == 2  # the first run exported and stored both files
    return Warm(project, cache, doc)


@pytest.fixture
def cache(warm: Warm, tmp_path: Path) -> Path:
    copy = tmp_path / "cache"
    shutil.copytree(warm.cache, copy)
    return copy


# The CLI in-process with the worker pool made to fail: a run that started a worker,
# or imported torch, exits non-zero.
NO_EXPORT = """
import sys
import exportlens.core.isolation.pool as pool

class NoWorkers:
    def __init__(self, *args, **kwargs):
        raise AssertionError("a worker pool was started")

pool.WorkerPool = NoWorkers
from exportlens.cli import run

code = run(sys.argv[1:])
assert "torch" not in sys.modules, "torch was imported"
sys.exit(code)
"""


def _run_without_export(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", NO_EXPORT, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_second_run_gives_identical_json(warm: Warm, cache: Path) -> None:
    code, doc = check_json(str(warm.project), extra=("--cache-dir", str(cache)))
    assert code == 0
    assert _from(doc, "cache") == _from(warm.doc, "run")
    assert [t["name"] for f in doc["files"] for t in f["targets"]] == ["TinyMLP", "Counter"]


def test_second_run_imports_no_torch_and_starts_no_worker(warm: Warm, cache: Path) -> None:
    proc = _run_without_export("check", "--format", "json", "--cache-dir", str(cache), str(warm.project))
    assert proc.returncode == 0, proc.stderr
    assert _from(json.loads(proc.stdout), "cache") == _from(warm.doc, "run")


def test_text_report_says_what_came_from_the_cache(warm: Warm, cache: Path) -> None:
    proc = _run_without_export("check", "--cache-dir", str(cache), str(warm.project))
    assert proc.returncode == 0, proc.stderr
    assert "exported in" in proc.stdout  # reported as the export was: with its original time
    assert proc.stdout.rstrip().splitlines()[-1].endswith("(2 files from the cache)")


def test_show_uses_the_cache_too(warm: Warm, cache: Path) -> None:
    proc = _run_without_export("show", "--cache-dir", str(cache), str(warm.project / "counter.py"))
    assert proc.returncode == 0, proc.stderr
    assert "BUFFER_MUTATION" in proc.stdout


def test_the_control_run_does_start_a_worker(warm: Warm, tmp_path: Path) -> None:
    # Proves the harness above can fail: with an empty cache, a worker is needed.
    proc = _run_without_export("check", "--cache-dir", str(tmp_path / "empty"), str(warm.project / "clean.py"))
    assert proc.returncode != 0
    assert "a worker pool was started" in proc.stderr


def test_no_cache_neither_reads_nor_writes(warm: Warm, tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys
        from exportlens.core.cache import store as cache

        def refuse(*args, **kwargs):
            raise AssertionError("the cache was used")

        cache.ResultCache.__init__ = refuse
        cache.ResultCache.lookup = refuse
        cache.ResultCache.store = refuse
        from exportlens.cli import run

        sys.exit(run(sys.argv[1:]))
        """
    )
    empty = tmp_path / "untouched"
    proc = subprocess.run(
        [sys.executable, "-c", script, "check", "--format", "json", "--no-cache", "--cache-dir", str(empty), str(warm.project)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [f["path"] for f in doc["files"]] == [f["path"] for f in warm.doc["files"]]
    assert not empty.exists()


def test_editing_a_local_helper_invalidates(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 60\n")
    (project / "helpers.py").write_text("WIDTH = 4\n")
    (project / "model.py").write_text(
        "import torch\nfrom helpers import WIDTH\n\n"
        "model = torch.nn.Linear(8, WIDTH)\nexample_args = (torch.randn(2, 8),)\n"
    )
    cache = tmp_path / "cache"

    def output_shape() -> list[int]:
        code, doc = check_json(str(project / "model.py"), extra=("--cache-dir", str(cache)))
        assert code == 0, doc
        (target,) = doc["files"][0]["targets"]
        return list(target["signature"]["outputs"][0]["shape"])

    assert output_shape() == [2, 4]
    (project / "helpers.py").write_text("WIDTH = 6\n")
    assert output_shape() == [2, 6]
    assert len(_entries(cache)) == 2  # one per version of the helper
    hit = _run_without_export("check", "--format", "json", "--cache-dir", str(cache), str(project / "model.py"))
    assert hit.returncode == 0, hit.stderr
    assert json.loads(hit.stdout)["files"][0]["targets"][0]["signature"]["outputs"][0]["shape"] == [2, 6]


def _shape_and_codes(model: Path, cache: Path) -> tuple[list[int] | None, list[str]]:
    """The first target's output shape (None when no target exported) and the codes."""
    _, doc = check_json(str(model), extra=("--cache-dir", str(cache)))
    (found,) = doc["files"]
    codes = [d["code"] for d in found["diagnostics"]]
    ok = [t for t in found["targets"] if t["status"] == "ok"]
    return (list(ok[0]["signature"]["outputs"][0]["shape"]) if ok else None), codes


def _small_project(folder: Path, model: str) -> Path:
    folder.mkdir()
    (folder / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 60\n")
    (folder / "model.py").write_text(model)
    return folder / "model.py"


def test_fixing_a_helper_that_raised_invalidates(tmp_path: Path) -> None:
    """The helper that raised left sys.modules, so it was never recorded: the cached
    import-error outlived the fix, for check and for a restarted server alike."""
    model = _small_project(tmp_path / "proj", "import torch\nfrom helpers import WIDTH\n\nmodel = torch.nn.Linear(8, WIDTH)\nexample_args = (torch.randn(2, 8),)\n")
    helpers = model.parent / "helpers.py"
    helpers.write_text("raise ValueError('not yet')\nWIDTH = 4\n")
    cache = tmp_path / "cache"
    assert _shape_and_codes(model, cache) == (None, ["import-error"])
    helpers.write_text("WIDTH = 4\n")
    assert _shape_and_codes(model, cache) == ([2, 4], [])


def test_creating_a_module_the_import_looked_for_invalidates(tmp_path: Path) -> None:
    """Negative dependencies: a module the import did not find (``extra.py``), and the
    ``__init__.py`` of a namespace folder, change the result when they appear."""
    model = _small_project(
        tmp_path / "proj",
        "import torch\nimport conf\n\ntry:\n    from extra import WIDTH\nexcept ImportError:\n    WIDTH = getattr(conf, 'WIDTH', 4)\n\n"
        "model = torch.nn.Linear(8, WIDTH)\nexample_args = (torch.randn(2, 8),)\n",
    )
    (model.parent / "conf").mkdir()  # a namespace package until it has an __init__.py
    (model.parent / "conf" / "notes.txt").write_text("no Python here yet")
    cache = tmp_path / "cache"
    assert _shape_and_codes(model, cache) == ([2, 4], [])
    (model.parent / "conf" / "__init__.py").write_text("WIDTH = 5\n")
    assert _shape_and_codes(model, cache) == ([2, 5], [])
    (model.parent / "extra.py").write_text("WIDTH = 6\n")
    assert _shape_and_codes(model, cache) == ([2, 6], [])


def test_a_missing_module_is_cached_until_it_appears_or_is_installed(tmp_path: Path) -> None:
    """A file whose import found nothing is answered from the cache (it used to be
    exported again on every run), until the module appears in the project (an absent
    dependency) or gets installed (checked at lookup: no file of the project changes)."""
    name = "exportlens_test_not_installed"
    model = _small_project(tmp_path / "proj", f"import torch\nfrom {name} import WIDTH\n\nmodel = torch.nn.Linear(8, WIDTH)\nexample_args = (torch.randn(2, 8),)\n")
    cache = tmp_path / "cache"
    assert _shape_and_codes(model, cache) == (None, ["import-error"])
    hit = _run_without_export("check", "--format", "json", "--cache-dir", str(cache), str(model))
    assert hit.returncode == 1, hit.stderr  # served from the cache: no torch, no worker
    assert [d["code"] for d in json.loads(hit.stdout)["files"][0]["diagnostics"]] == ["import-error"]

    site = tmp_path / "site"  # "installing" it: a folder on the interpreter's path
    site.mkdir()
    (site / f"{name}.py").write_text("WIDTH = 3\n")
    _, doc = check_json(str(model), extra=("--cache-dir", str(cache)), env={"PYTHONPATH": str(site)})
    assert [t["signature"]["outputs"][0]["shape"] for t in doc["files"][0]["targets"]] == [[2, 3]]

    (model.parent / f"{name}.py").write_text("WIDTH = 5\n")  # the project's own module
    assert _shape_and_codes(model, cache) == ([2, 5], [])


def test_editing_a_file_the_model_reads_invalidates(tmp_path: Path) -> None:
    model = _small_project(
        tmp_path / "proj",
        "import json\nfrom pathlib import Path\n\nimport torch\n\n"
        "config = json.loads((Path(__file__).parent / 'config.json').read_text())\n"
        "model = torch.nn.Linear(8, config['width'])\nexample_args = (torch.randn(2, 8),)\n",
    )
    config = model.parent / "config.json"
    config.write_text('{"width": 4}')
    cache = tmp_path / "cache"
    assert _shape_and_codes(model, cache) == ([2, 4], [])
    config.write_text('{"width": 7}')
    assert _shape_and_codes(model, cache) == ([2, 7], [])
    config.write_text('{"width": 4}')  # back to the first bytes: the first entry is a hit
    hit = _run_without_export("check", "--format", "json", "--cache-dir", str(cache), str(model))
    assert hit.returncode == 0, hit.stderr
    assert json.loads(hit.stdout)["files"][0]["targets"][0]["signature"]["outputs"][0]["shape"] == [2, 4]


def test_cache_clear_empties_the_folder(cache: Path) -> None:
    proc = run_cli("cache", "clear", "--cache-dir", str(cache))
    assert proc.returncode == 0, proc.stderr
    assert "Removed 2 cached results" in proc.stdout
    assert not _entries(cache) and not list(cache.glob("??/*"))


def test_a_corrupt_entry_is_rewritten(warm: Warm, cache: Path) -> None:
    for entry in _entries(cache):
        entry.write_bytes(b"\x00garbage" * 10)
    fresh = run_cli("check", "--format", "json", "--cache-dir", str(cache), str(warm.project))
    assert fresh.returncode == 0, fresh.stderr
    assert _without_times(json.loads(fresh.stdout)) == _without_times(warm.doc)
    assert "unreadable cache file" in fresh.stderr
    proc = _run_without_export("check", "--format", "json", "--cache-dir", str(cache), str(warm.project))
    assert proc.returncode == 0, proc.stderr  # rewritten: now a pure hit


def test_cache_location_priority(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.exportlens]\ncache_dir = ".exportlens-cache"\n')

    def where(*args: str, env: dict[str, str | None]) -> str:
        proc = run_cli("cache", "dir", *args, cwd=project, env={"XDG_CACHE_HOME": str(tmp_path / "xdg"), **env})
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert where("--cache-dir", str(tmp_path / "cli"), env={"EXPORTLENS_CACHE_DIR": str(tmp_path / "env")}) == str(tmp_path / "cli")
    assert where(env={"EXPORTLENS_CACHE_DIR": str(tmp_path / "env")}) == str(tmp_path / "env")
    assert where(env={"EXPORTLENS_CACHE_DIR": None}) == str(project / ".exportlens-cache")
    (project / "pyproject.toml").write_text("[tool.exportlens]\n")
    assert where(env={"EXPORTLENS_CACHE_DIR": None}) == str(tmp_path / "xdg" / "exportlens")


def test_pyproject_cache_dir_is_used_by_check(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.exportlens]\ntimeout = 60\ncache_dir = ".exportlens-cache"\n')
    (project / "broken.py").write_text("example_args = (\n")  # a syntax error: cached without torch
    proc = run_cli("check", str(project), env={"EXPORTLENS_CACHE_DIR": None})
    assert proc.returncode == 1, proc.stderr
    assert len(_entries(project / ".exportlens-cache")) == 1


def test_a_large_file_the_model_reads_is_known_by_its_metadata_and_still_invalidates(tmp_path: Path) -> None:
    """A checkpoint in the project (here a sparse 2 GB file whose first bytes the model
    reads, as a header) is not hashed -- hashing a 70B one took minutes of each export
    and each lookup -- yet a change of one byte in place, same size, is a miss."""
    model = _small_project(
        tmp_path / "proj",
        "from pathlib import Path\n\nimport torch\n\n"
        "with open(Path(__file__).parent / 'weights.bin', 'rb') as f:\n    width = f.read(1)[0]\n"
        "model = torch.nn.Linear(8, width)\nexample_args = (torch.randn(2, 8),)\n",
    )
    weights = model.parent / "weights.bin"
    with open(weights, "wb") as f:
        f.write(bytes([4]))
        f.truncate(2 << 30)
    made = weights.stat()  # an hour ago: the write below cannot share its timestamps' clock tick
    os.utime(weights, (made.st_atime - 3600, made.st_mtime - 3600))
    cache = tmp_path / "cache"
    assert _shape_and_codes(model, cache) == ([2, 4], [])
    hit = _run_without_export("check", "--format", "json", "--cache-dir", str(cache), str(model))
    assert hit.returncode == 0, hit.stderr  # unchanged: served from the cache
    with open(weights, "r+b") as f:
        f.write(bytes([7]))
    assert weights.stat().st_size == 2 << 30
    assert _shape_and_codes(model, cache) == ([2, 7], [])
