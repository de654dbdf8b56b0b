"""What a real job records as the result's dependencies and as the files it wrote.

Run through a warm worker (the audit hook lives in the disposable job process only):
every local module the run tried to import -- one that raised, one not there, a
namespace folder's missing ``__init__.py`` -- and the project files it read are
dependencies with their state; files outside the project, the model itself,
pyproject.toml (exportlens's reading) and the files it wrote are not.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from exportlens.core.disk.states import ABSENT
from exportlens.core.isolation.pool import WorkerPool
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.model.results import FileResult

RAISES = "import torch\nimport helpers\nmodel = torch.nn.Linear(8, 4)\nexample_args = (torch.randn(2, 8),)\n"

READS = """import json
from pathlib import Path

import torch

try:
    import extra
except ImportError:
    extra = None
from ns import mod

here = Path(__file__).parent
config = json.loads((here / "config.json").read_text())
try:
    open(here / "override.json")
except FileNotFoundError:
    pass
OUTSIDE = (here.parent / "outside.txt").read_text()
(here / "gen.py").write_text("VALUE = 1\\n")
import gen
(here / "out.txt").write_text("written by the model")
model = torch.nn.Linear(8, config["width"] + mod.EXTRA + gen.VALUE)
example_args = (torch.randn(2, 8),)
"""


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FileResult]:
    base = tmp_path_factory.mktemp("deps")
    project = base / "proj"
    (project / "ns").mkdir(parents=True)  # a namespace package: no __init__.py
    (project / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 60\n")
    (project / "helpers.py").write_text("raise ValueError('the helper is broken')\n")
    (project / "raises.py").write_text(RAISES)
    (project / "reads.py").write_text(READS)
    (project / "ns" / "mod.py").write_text("EXTRA = 1\n")
    (project / "config.json").write_text('{"width": 2}')
    (base / "outside.txt").write_text("not the project's")
    requests = [ExportRequest(id=i, path=str(project / name), root=str(project), limits=Limits(timeout_s=60)) for i, name in enumerate(["raises.py", "reads.py"])]
    with WorkerPool(1) as pool:
        return {Path(r.path).name: r for r in pool.run(requests)}


def _deps(result: FileResult) -> dict[str, str]:
    assert len(result.local_imports) == len(result.local_import_hashes)
    return dict(zip(result.local_imports, result.local_import_hashes, strict=True))


def test_a_helper_that_raised_is_a_dependency(results: dict[str, FileResult]) -> None:
    result = results["raises.py"]
    assert [d.code for d in result.diagnostics] == ["import-error"]
    project = Path(result.path).parent
    deps = _deps(result)
    assert deps[str(project / "helpers.py")] == _sha(project / "helpers.py")  # the bytes that raised
    assert deps[str(project / "helpers" / "__init__.py")] == ABSENT  # looked for first, not there


def test_missing_modules_and_files_read_are_dependencies(results: dict[str, FileResult]) -> None:
    result = results["reads.py"]
    assert result.diagnostics == () and [t.status for t in result.targets] == ["ok"]
    project = Path(result.path).parent
    deps = _deps(result)
    assert deps[str(project / "extra.py")] == ABSENT
    assert deps[str(project / "extra" / "__init__.py")] == ABSENT
    assert deps[str(project / "ns" / "__init__.py")] == ABSENT  # creating it changes what `ns` is
    assert deps[str(project / "ns" / "mod.py")] == _sha(project / "ns" / "mod.py")
    assert deps[str(project / "config.json")] == _sha(project / "config.json")
    assert deps[str(project / "override.json")] == ABSENT  # opened, not found
    for not_an_input in ("reads.py", "pyproject.toml", "gen.py", "out.txt"):
        assert str(project / not_an_input) not in deps, not_an_input
    assert not [d for d in deps if not d.startswith(str(project) + "/")]  # outside.txt, torch, the stdlib


def test_files_the_job_wrote_are_reported_with_what_it_left(results: dict[str, FileResult]) -> None:
    result = results["reads.py"]
    project = Path(result.path).parent
    written = dict(zip(result.written, result.written_hashes, strict=True))
    assert written == {str(project / "gen.py"): _sha(project / "gen.py"), str(project / "out.txt"): _sha(project / "out.txt")}
