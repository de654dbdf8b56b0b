"""Libraries a model imports are imported once into the warm worker, while it is idle,
and every later job starts with them; what may not be preloaded is refused, with the
reason kept in the preload record, and never costs an export.

Real workers and real model files; the libraries are throwaway packages in a folder
on ``PYTHONPATH`` (installed, as far as the worker can tell), each writing a line
``<module> <pid> <file>`` to a log when it is imported: which process imported what,
and how often, is the event every test waits on and checks.
"""

from __future__ import annotations

import os
import textwrap
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from exportlens.core.isolation import pool as pool_module
from exportlens.core.isolation.pool import WorkerPool
from exportlens.core.isolation.speedups import preload_record
from exportlens.core.isolation.startmethod import StartMethod
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.model.results import FileResult

pytestmark = pytest.mark.needs_speedup("preloading")  # what it checks is that speed-up's (tests/conftest.py)

ROOMY = Limits(timeout_s=600, memory_mb=8192)
# Tests that count which processes imported a library: forks inherit the worker's, a
# spawned job imports them itself while it warms up (``test_spawn`` checks that).
FORK = StartMethod("fork", "jobs inherit what the worker imported")
WAIT_S = float(os.environ.get("TEST_WAIT_S", "600"))  # for the worker to do something while idle, on however loaded a machine

LOGS_ITS_IMPORT = """
import os
with open(os.environ["IMPORT_LOG"], "a") as _f:
    _f.write(f"{__name__} {os.getpid()} {__file__}\\n")
"""

# In the worker, which does not lead its process group; never in a job, which does
# (``child_main`` makes it the leader before the model runs).
IN_THE_WORKER = "os.getpgid(0) != os.getpid()"

MODEL = """
import torch
{imports}


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear({width}, 2)

    def forward(self, x):
        return self.fc(x)


model = Model()
example_args = (torch.randn(1, {width}),)
"""


class Site:
    """A folder of throwaway libraries on the workers' ``PYTHONPATH``, and the log of their imports."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.folder = root / "site"
        self.folder.mkdir()
        self.log = root / "imports.log"
        self.log.touch()
        monkeypatch.setenv("PYTHONPATH", str(self.folder))
        monkeypatch.setenv("IMPORT_LOG", str(self.log))

    def library(self, name: str, body: str = "WIDTH = 3\n") -> Path:
        init = self.folder / name / "__init__.py"
        init.parent.mkdir(exist_ok=True)
        # Written anew, as an installer does: a new file in place of the old one.
        staged = init.with_suffix(".new")
        staged.write_text(LOGS_ITS_IMPORT + textwrap.dedent(body))
        os.replace(staged, init)
        return init

    def imports(self) -> list[tuple[str, int, str]]:
        """``(module, pid, file)`` per import so far."""
        out = []
        for line in self.log.read_text().splitlines():
            name, pid, file = line.split(" ", 2)
            out.append((name, int(pid), file))
        return out

    def importers(self, module: str, file: Path | None = None) -> list[int]:
        return [pid for name, pid, f in self.imports() if name == module and (file is None or f == str(file))]


def project(folder: Path, imports: list[str], width: str = "3", files: dict[str, str] | None = None, code: str = "") -> Path:
    """A model file importing ``imports`` (then running ``code``), in ``folder`` with ``files``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    model = folder / "model.py"
    model.write_text(MODEL.format(imports="\n".join([*(f"import {m}" for m in imports), code]), width=width))
    return model


def export(pool: WorkerPool, model: Path, id: int) -> FileResult:
    """The model exported on the pool (its text changed each time: never the same request)."""
    source = model.read_text() + f"\nrun = {id}\n"
    (result,) = list(pool.run([ExportRequest(id=id, path=str(model), source=source, root=str(model.parent), limits=ROOMY)]))
    return result


def batch(models: list[Path], cache: Path) -> tuple[int, list[FileResult], Path]:
    """The models checked as one batch (``Export.more``) on a one-worker fork pool: the
    worker's pid, the results, the preload record's path."""
    requests = [ExportRequest(id=i, path=str(m), root=str(m.parent), limits=ROOMY) for i, m in enumerate(models)]
    with WorkerPool(1, preload_dir=cache, start_method=FORK) as pool:
        pool.wait_ready()
        (worker,) = pool.worker_pids()
        return worker, list(pool.run(requests)), pool.record


def width_of(result: FileResult) -> int:
    [target] = result.targets
    assert target.status == "ok", result.diagnostics
    assert target.signature is not None
    [x] = [s for s in target.signature.inputs if s.kind == "USER_INPUT"]
    assert x.arg.meta is not None
    return int(x.arg.meta.shape[1])


def wait_for(condition: Callable[[], object], what: str) -> None:
    end = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] == "Z"  # exited, not reaped yet
    except FileNotFoundError:
        return True


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Site:
    return Site(tmp_path, monkeypatch)


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def test_a_library_is_imported_once_and_later_jobs_reuse_it(site: Site, cache: Path, tmp_path: Path) -> None:
    slowlib = site.library("slowlib")
    model = project(tmp_path / "a", ["slowlib"], width="slowlib.WIDTH")
    with WorkerPool(1, preload_dir=cache, start_method=FORK) as pool:
        pool.wait_ready()
        (worker,) = pool.worker_pids()
        first = export(pool, model, 1)
        assert width_of(first) == 3
        [job] = site.importers("slowlib")
        assert job != worker
        wait_for(lambda: worker in site.importers("slowlib"), "the idle worker imported slowlib")
        for i in (2, 3):
            assert width_of(export(pool, model, i)) == 3
        # Imported by the first job and by the worker, by no job since.
        assert site.importers("slowlib") == [job, worker]
        assert preload_record.read(pool.record).libraries["slowlib"].modules == ["slowlib"]
        # The result depends on the library's state, as the worker imported it.
        later = export(pool, model, 4)
        assert later.libraries == (str(slowlib),)
    # A new worker (a restarted server) imports it while idle, before any job asks.
    with WorkerPool(1, preload_dir=cache, start_method=FORK) as pool:
        pool.wait_ready()
        (worker,) = pool.worker_pids()
        wait_for(lambda: worker in site.importers("slowlib"), "a new worker imported slowlib from the record")
        assert width_of(export(pool, model, 5)) == 3
        assert len(site.importers("slowlib")) == 3


def test_a_batch_imports_a_library_once_before_its_next_jobs(site: Site, cache: Path, tmp_path: Path) -> None:
    """A batch (``check`` of many files) never leaves the worker idle: without a word
    from the pool each of its jobs would import the library again. The pool says more
    requests wait (``Export.more``), and the worker imports what the first job imported
    before it runs the next."""
    site.library("slowlib")
    # Imported where the worker cannot foresee it (inside a try): the first job imports it.
    guarded = "try:\n    import slowlib\nexcept ImportError:\n    raise"
    models = [project(tmp_path / name, [], width="slowlib.WIDTH", code=guarded) for name in "abc"]
    worker, results, _ = batch(models, cache)
    assert [width_of(r) for r in results] == [3, 3, 3]
    [first, *rest] = site.importers("slowlib")
    assert first != worker
    assert rest == [worker], site.imports()  # the first job, then the worker: no later job
    assert all(r.libraries == (str(tmp_path / "site" / "slowlib" / "__init__.py"),) for r in results[1:])


def test_a_batch_imports_what_its_first_file_imports_before_its_first_job(site: Site, cache: Path, tmp_path: Path) -> None:
    """The libraries a batch's next file names in its top-level imports are imported
    by the worker before that file's job, not by the job and then again by the worker
    (each worker's first transformers file did that: ~1.7 s twice). ``from a import
    b`` takes the module that defines ``b``. What the worker cannot foresee (an import
    inside a function), and a library a project file shadows, stay the job's."""
    site.library("slowlib")
    site.library("lazylib", "import importlib\n\ndef __getattr__(name):\n    return getattr(importlib.import_module('lazylib._impl'), name)\n")
    (site.folder / "lazylib" / "_impl.py").write_text(LOGS_ITS_IMPORT + "class Width:\n    WIDTH = 3\n")
    site.library("laterlib")
    site.library("shadowed")
    code = "from lazylib import Width\n\n\ndef _later():\n    import laterlib\n\n\n_later()"
    files = {"shadowed.py": "import os\nwith open(os.environ['IMPORT_LOG'], 'a') as f:\n    f.write(f'project-shadowed {os.getpid()} {__file__}\\n')\n"}
    models = [project(tmp_path / name, ["slowlib", "shadowed"], width="Width.WIDTH", files=files, code=code) for name in "abc"]
    worker, results, record = batch(models, cache)
    assert [width_of(r) for r in results] == [3, 3, 3]
    imports = site.imports()
    assert site.importers("slowlib") == [worker], imports
    assert site.importers("lazylib") == [worker] and site.importers("lazylib._impl") == [worker], imports
    assert worker not in site.importers("shadowed") and len(site.importers("project-shadowed")) == 3, imports
    [job, *rest] = site.importers("laterlib")
    assert job != worker and rest == [worker], imports  # the first job, then the worker before the next
    assert preload_record.read(record).libraries["lazylib"].modules == ["lazylib._impl"]


def test_a_batch_leaves_more_modules_of_a_library_it_holds_to_the_jobs_that_import_them(site: Site, cache: Path, tmp_path: Path) -> None:
    """Before a batch's next job the worker imports only libraries it holds nothing of
    yet: a module of one it holds (a model family's own, ``transformers.models.llama``)
    is imported by the job that needs it, and by the worker only once idle --
    preloading it first costs more (what other code sees taken and compared, the
    library units learned again) than that job's own import, and a batch's next file
    is often of another family."""
    site.library("fam")
    for sub in "bcde":
        (site.folder / "fam" / f"{sub}.py").write_text(LOGS_ITS_IMPORT + "WIDTH = 3\n")
    # Imported inside a function, where the worker cannot foresee it (``predict``).
    load = "def _load():\n    global fam\n    import fam.{sub}\n\n\n_load()"
    models = [project(tmp_path / sub, [], width=f"fam.{sub}.WIDTH", code=load.format(sub=sub)) for sub in "bcde"]
    worker, results, _ = batch(models, cache)
    assert [width_of(r) for r in results] == [3, 3, 3, 3]
    imports = [(name, pid == worker) for name, pid, _ in site.imports()]
    # The library, new to the worker, is preloaded before the second job (no later job imports it) ...
    [first, *rest] = site.importers("fam")
    assert first != worker and rest == [worker], imports
    assert imports.index(("fam", True)) < imports.index(("fam.c", False))
    # ... the modules of it that later files import, each of their jobs imports itself:
    # not the worker before the next job, though it was told more wait.
    assert [job for job in (("fam.b", False), ("fam.c", False), ("fam.d", False), ("fam.e", False)) if job not in imports] == [], imports
    assert ("fam.c", True) not in imports[: imports.index(("fam.d", False))], imports


def test_a_model_file_inside_an_installed_package_keeps_the_preloaded_library(site: Site, cache: Path, tmp_path: Path) -> None:
    """A model file inside an installed package (torch's ExportDB examples live in
    torch) has that package's folder, site-packages, on its ``sys.path``: the library
    found there is the preloaded one itself, not a project file that shadows it, so
    the job keeps it (taking torch's or functorch's modules out made the job import
    their extensions again, and every later export failed)."""
    site.library("slowlib")
    package = site.folder / "models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    model = package / "model.py"
    model.write_text(MODEL.format(imports="import slowlib", width="slowlib.WIDTH"))
    with WorkerPool(1, preload_dir=cache, start_method=FORK) as pool:
        pool.wait_ready()
        (worker,) = pool.worker_pids()
        assert width_of(export(pool, model, 1)) == 3
        wait_for(lambda: worker in site.importers("slowlib"), "the idle worker imported slowlib")
        assert width_of(export(pool, model, 2)) == 3
        [job, preloaded] = site.importers("slowlib")  # the first job, the worker: not the second job
        assert preloaded == worker != job


def test_project_modules_are_never_preloaded_nor_shadowed_by_a_preloaded_library(site: Site, cache: Path, tmp_path: Path) -> None:
    installed = site.library("slowlib")
    site.library("marker")  # imported last: once the worker holds it, it has been through the rest
    # Project a: a local module no library is named like, and the installed slowlib.
    a = project(tmp_path / "a", ["helpers", "slowlib", "marker"], width="slowlib.WIDTH", files={"helpers.py": LOGS_ITS_IMPORT})
    # Project b: its own slowlib.py, which its model must get, not the preloaded one.
    b = project(tmp_path / "b", ["slowlib"], width="slowlib.WIDTH", files={"slowlib.py": LOGS_ITS_IMPORT + "WIDTH = 7\n"})
    local = tmp_path / "b" / "slowlib.py"
    with WorkerPool(1, preload_dir=cache, start_method=FORK) as pool:
        pool.wait_ready()
        (worker,) = pool.worker_pids()
        assert width_of(export(pool, a, 1)) == 3
        wait_for(lambda: worker in site.importers("marker"), "the idle worker imported what project a imported")
        assert worker in site.importers("slowlib", installed)

        from_b = export(pool, b, 2)
        assert width_of(from_b) == 7
        assert str(local) in from_b.local_imports and from_b.libraries == ()
        # The preloaded library is the installed one still, for project a.
        from_a = export(pool, a, 3)
        assert width_of(from_a) == 3
        assert str(installed) in from_a.libraries
        # Creating slowlib.py in project a would change what its import finds.
        absent = dict(zip(from_a.local_imports, from_a.local_import_hashes, strict=True))
        assert absent[str(tmp_path / "a" / "slowlib.py")] == "absent"
        # The export after b's ran in a worker that still has nothing of b's.
        export(pool, a, 4)

    assert worker not in site.importers("helpers") and site.importers("helpers")
    assert worker not in site.importers("slowlib", local) and site.importers("slowlib", local)
    assert site.importers("slowlib", installed) == [site.importers("slowlib", installed)[0], worker]
    record = preload_record.read(pool.record)
    assert "helpers" not in record.libraries and set(record.libraries) >= {"slowlib", "marker"}
    assert all(m.partition(".")[0] in record.libraries for lib in record.libraries.values() for m in lib.modules)


def test_a_library_that_starts_a_thread_is_refused_and_its_models_still_export(site: Site, cache: Path, tmp_path: Path) -> None:
    site.library(
        "threadlib",
        """
        import threading
        import time

        WIDTH = 4
        threading.Thread(target=time.sleep, args=(3600,), name="threadlib-poller", daemon=True).start()
        """,
    )
    site.library("marker")
    model = project(tmp_path / "p", ["threadlib", "marker"], width="threadlib.WIDTH")
    with WorkerPool(1, preload_dir=cache) as pool:
        pool.wait_ready()
        (first_worker,) = pool.worker_pids()
        assert width_of(export(pool, model, 1)) == 4
        wait_for(lambda: "threadlib" in preload_record.read(pool.record).refused, "the worker refused threadlib")
        reason = preload_record.read(pool.record).refused["threadlib"].reason
        assert "thread" in reason and "threadlib-poller" in reason
        # The worker that imported it retired; its replacement exports the model, whose
        # job imports the library itself, and preloads the rest but never threadlib.
        assert width_of(export(pool, model, 2)) == 4
        (worker,) = pool.worker_pids()
        assert worker != first_worker
        wait_for(lambda: worker in site.importers("marker"), "the new worker preloaded the other library")
        assert width_of(export(pool, model, 3)) == 4
    assert first_worker in site.importers("threadlib")
    assert worker not in site.importers("threadlib")
    assert len(site.importers("threadlib")) == 4  # three jobs and the first worker


def test_a_request_outlives_every_worker_that_retires_before_starting_it(site: Site, cache: Path, tmp_path: Path) -> None:
    """Two libraries in the record that each make a worker retire when it preloads them
    (each starts a thread): the first request of a batch is handed to a worker that
    retires for the first library, then to its replacement, which retires for the
    second. A retiring worker is no failure, however many in a row: the request runs
    on the third worker, which holds neither."""
    thread = """
        import threading
        import time

        WIDTH = 5
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
        """
    site.library("threadlib_a", thread)
    site.library("threadlib_b", thread)
    models = [project(tmp_path / name, ["threadlib_a", "threadlib_b"], width="threadlib_a.WIDTH") for name in "xy"]
    requests = [ExportRequest(id=i, path=str(m), root=str(m.parent), limits=ROOMY) for i, m in enumerate(models)]
    with WorkerPool(1, preload_dir=cache, start_method=FORK) as pool:

        def learned(record: preload_record.Record) -> None:  # what an earlier session's jobs imported
            for name in ("threadlib_a", "threadlib_b"):
                record.libraries[name] = preload_record.Library(modules=[name], used=preload_record.today())

        preload_record.update(pool.record, learned)
        results = list(pool.run(requests))
        assert [width_of(r) for r in results] == [5, 5]
        assert sorted(preload_record.read(pool.record).refused) == ["threadlib_a", "threadlib_b"]
    a, b = set(site.importers("threadlib_a")), set(site.importers("threadlib_b"))
    assert len(a - b) == 1 and len(b - a) == 1, site.imports()  # the first worker, then the second
    assert len(a & b) == 2  # the two jobs, on the third


def test_a_library_whose_import_crashes_the_worker_loses_no_export(site: Site, cache: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    site.library(
        "crashlib",
        f"""
        import os, time

        WIDTH = 5
        if {IN_THE_WORKER}:
            while not os.path.exists({str(go)!r}):  # the test hands the worker a request first
                time.sleep(0.01)
            os.abort()
        """,
    )
    site.library("marker")
    model = project(tmp_path / "p", ["crashlib", "marker"], width="crashlib.WIDTH")
    with WorkerPool(1, preload_dir=cache) as pool:
        pool.wait_ready()
        (first_worker,) = pool.worker_pids()
        assert width_of(export(pool, model, 1)) == 5
        wait_for(lambda: first_worker in site.importers("crashlib"), "the worker began importing crashlib")
        results: list[FileResult] = []
        running = threading.Thread(target=lambda: results.append(export(pool, model, 2)))
        running.start()
        wait_for(lambda: pool.holds(2), "the worker was handed the next request")
        go.touch()  # the import crashes the worker while it holds the request
        running.join(timeout=WAIT_S)
        [result] = results
        assert width_of(result) == 5  # run by the replacement, not a worker-crash
        (worker,) = pool.worker_pids()
        assert worker != first_worker
        wait_for(lambda: worker in site.importers("marker"), "the new worker preloaded the other library")
    refusal = preload_record.read(pool.record).refused["crashlib"]
    assert "SIGABRT" in refusal.reason and "crashlib" in refusal.reason
    assert worker not in site.importers("crashlib")


def test_a_library_whose_import_hangs_the_worker_loses_no_export(site: Site, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "PRELOAD_TIMEOUT_S", 10.0)
    site.library(
        "hanglib",
        f"""
        import os, time

        WIDTH = 6
        if {IN_THE_WORKER}:
            time.sleep(3600)
        """,
    )
    model = project(tmp_path / "p", ["hanglib"], width="hanglib.WIDTH")
    with WorkerPool(1, preload_dir=cache) as pool:
        pool.wait_ready()
        (first_worker,) = pool.worker_pids()
        assert width_of(export(pool, model, 1)) == 6
        wait_for(lambda: first_worker in site.importers("hanglib"), "the worker began importing hanglib")
        assert width_of(export(pool, model, 2)) == 6  # waited for the hang to be seen, then ran elsewhere
        assert pool.worker_pids() != [first_worker]
    reason = preload_record.read(pool.record).refused["hanglib"].reason
    assert "stopped responding" in reason and "hanglib" in reason


@pytest.fixture
def stale_check(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("EXPORTLENS_STALE_CHECK_S", "0.2")  # read by the workers as they start
    yield


def test_an_upgraded_library_retires_the_worker_and_its_results(site: Site, cache: Path, tmp_path: Path, stale_check: None) -> None:
    from exportlens.core.pipeline import Overrides, Pipeline

    init = site.library("verlib")
    model = project(tmp_path / "p", ["verlib"], width="verlib.WIDTH")
    pipeline = Pipeline(Overrides(cache_dir=str(cache)))
    log = tmp_path / "workers.log"
    with WorkerPool(1, preload_dir=cache, log_path=log) as pool:
        pool.wait_ready()
        (first_worker,) = pool.worker_pids()
        batch = pipeline.run([str(model)], pool=pool)
        assert (batch.hits, width_of(batch.results[0])) == (0, 3)
        assert batch.results[0].libraries == (str(init),)
        wait_for(lambda: first_worker in site.importers("verlib"), "the worker preloaded verlib")
        assert pipeline.run([str(model)], pool=pool).hits == 1

        site.library("verlib", "WIDTH = 5\n")  # pip install -U verlib
        wait_for(lambda: gone(first_worker), "the worker retired")
        batch = pipeline.run([str(model)], pool=pool)
        assert (batch.hits, width_of(batch.results[0])) == (0, 5)  # the old result is not reused
        (worker,) = pool.worker_pids()
        assert worker != first_worker
    assert f"retiring: {init} changed on disk" in log.read_text()


GELU_MODEL = """
import torch
{imports}


class Act(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x)


model = Act()
example_args = (torch.ones(1, 3),)
"""


def test_a_library_that_patches_torch_at_import_is_refused_and_reaches_no_other_file(site: Site, cache: Path, tmp_path: Path) -> None:
    """As speed-up libraries patch torch at import (here ``gelu = silu``, summed so that
    the signature shows it): preloaded, every later job would have it, including the
    jobs of files that never import it (issue 29). The worker refuses it, saying what it
    changed, and retires; a library that only adds names and registers its own classes
    is preloaded as before."""
    site.library(
        "patchlib",
        """
        import torch

        def _silu_summed(x, approximate="none"):
            return torch.nn.functional.silu(x).sum(-1)

        torch.nn.functional.gelu = _silu_summed
        """,
    )
    site.library(
        "ownlib",
        """
        import torch
        import torch.utils._pytree as pytree

        class Pair:
            def __init__(self, a, b):
                self.a, self.b = a, b

        pytree.register_pytree_node(Pair, lambda p: ([p.a, p.b], None), lambda xs, _: Pair(*xs))
        torch.nn.Module.ownlib_helper = lambda self: None  # a new name: seen only by code that asks for it
        """,
    )
    patched = tmp_path / "a" / "model.py"
    patched.parent.mkdir()
    patched.write_text(GELU_MODEL.format(imports="import patchlib\nimport ownlib"))
    plain = tmp_path / "b" / "model.py"
    plain.parent.mkdir()
    plain.write_text(GELU_MODEL.format(imports=""))

    def outputs(result: FileResult) -> list[int]:
        [target] = result.targets
        assert target.status == "ok" and target.signature is not None, result.diagnostics
        [out] = target.signature.outputs
        assert out.arg.meta is not None
        return list(out.arg.meta.shape)

    with WorkerPool(1, preload_dir=cache) as pool:
        pool.wait_ready()
        (first_worker,) = pool.worker_pids()
        assert outputs(export(pool, patched, 1)) == [1]  # its own job: patched
        wait_for(lambda: "patchlib" in preload_record.read(pool.record).refused, "the worker refused patchlib")
        reason = preload_record.read(pool.record).refused["patchlib"].reason
        assert "torch.nn.functional.gelu replaced" in reason, reason
        assert outputs(export(pool, plain, 2)) == [1, 3]  # torch's gelu
        (worker,) = pool.worker_pids()
        assert worker != first_worker
        assert outputs(export(pool, patched, 3)) == [1]  # its job imports both again
        wait_for(lambda: worker in site.importers("ownlib"), "the new worker preloaded ownlib")
        assert outputs(export(pool, plain, 4)) == [1, 3]
        assert outputs(export(pool, patched, 5)) == [1]
        assert "ownlib" not in preload_record.read(pool.record).refused
    assert worker not in site.importers("patchlib")


TRANSFORMERS_MODEL = """
import sys

PRELOADED = "transformers.modeling_utils" in sys.modules
import safetensors
import torch
import transformers.modeling_utils as modeling_utils
from transformers import BertConfig, BertModel

# The worker installs the weights patches before it preloads anything: transformers,
# which binds safe_open at its import, must have bound the patched one.
PATCHED = getattr(modeling_utils.safe_open, "__exportlens__", False) and modeling_utils.safe_open is safetensors.safe_open
config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37, max_position_embeddings=64)
model = BertModel(config).eval()
example_args = (torch.zeros(2, 8 if PRELOADED and PATCHED else 5 if PATCHED else 3, dtype=torch.long),)
"""


@pytest.mark.slow
def test_transformers_preloaded_binds_the_patched_safe_open(cache: Path, tmp_path: Path) -> None:
    model = tmp_path / "p" / "bert.py"
    model.parent.mkdir()
    model.write_text(TRANSFORMERS_MODEL)
    with WorkerPool(1, preload_dir=cache) as pool:
        pool.wait_ready()
        first = export(pool, model, 1)
        assert width_of(first) == 5  # patched, imported by the job itself
        wait_for(lambda: "transformers" in preload_record.read(pool.record).libraries, "the worker preloaded transformers")
        second = export(pool, model, 2)
        assert width_of(second) == 8  # preloaded, and patched
        assert [(s.kind, s.target) for s in second.targets[0].signature.inputs] == [(s.kind, s.target) for s in first.targets[0].signature.inputs]  # type: ignore[union-attr]


# The job's environment, as the model sees it: 7 wide when OPENBLAS_NUM_THREADS is set
# (its value + 5 when it is a number), 3 when it is not.
SEES_BLAS_ENV = """
import os
import torch

value = os.environ.get("OPENBLAS_NUM_THREADS")
model = torch.nn.Identity()
example_args = (torch.zeros(1, 3 if value is None else int(value) + 5),)
"""


@pytest.mark.parametrize("user", [None, "2"])
def test_the_worker_asks_openblas_for_one_thread_and_the_model_sees_the_users_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user: str | None) -> None:
    """The worker sets OPENBLAS_NUM_THREADS=1 unless the user did (scipy's OpenBLAS
    pool had transformers refused where torchao is installed:
    ``test_transformers_preloaded_binds_the_patched_safe_open`` failed there); the
    model, and what it starts, see the user's environment: nothing set, or the user's 2."""
    if user is None:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", user)
    model = tmp_path / "p" / "model.py"
    model.parent.mkdir()
    model.write_text(SEES_BLAS_ENV)
    with WorkerPool(1) as pool:
        pool.wait_ready()
        assert width_of(export(pool, model, 1)) == (3 if user is None else 7)
