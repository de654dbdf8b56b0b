"""One model text, several dependency lists: the manifest keeps each, so a result stays
reachable when a later run of the same text recorded another list (issue 29).

The same bytes and settings need not give the same list: a job forked from a worker
that has preloaded a library records where an import of it would have looked (a
negative dependency a job without it does not record), and a local module run from
an editor's unsaved text adds what that text imports. The manifest once kept only the
last list, so the first result of the text -- the one a restarted server looks up
after the helper was broken and restored -- was filed under a list no lookup read.
"""

from __future__ import annotations

from pathlib import Path

from exportlens.core.cache.store import MANIFEST_LISTS, ResultCache
from exportlens.core.disk.states import ABSENT, file_state
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.model.results import FileResult, TargetResult

MODEL = "import torch\nfrom helpers import WIDTH\nmodel = torch.nn.Linear(8, WIDTH)\nexample_args = (torch.randn(2, 8),)\n"


def _project(tmp_path: Path) -> tuple[Path, Path, ExportRequest]:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[tool.exportlens]\n")
    helpers = root / "helpers.py"
    helpers.write_text("WIDTH = 4\n")
    model = root / "model.py"
    model.write_text(MODEL)
    return root, helpers, ExportRequest(id=0, path=str(model), root=str(root), limits=Limits(30.0, 2048))


def _result(request: ExportRequest, deps: dict[str, str], status: str) -> FileResult:
    return FileResult(request.path, (), (TargetResult("Linear", 3, status),), local_imports=tuple(deps), local_import_hashes=tuple(deps.values()))


def test_a_result_stays_reachable_after_the_same_text_recorded_another_list(tmp_path: Path) -> None:
    root, helpers, request = _project(tmp_path)
    cache = ResultCache(tmp_path / "cache")
    good = file_state(str(helpers))
    assert good is not None
    first = _result(request, {str(helpers): good}, "ok")
    cache.store(request, first)

    # The helper broken, and the run in a worker that preloaded torch: one more
    # (negative) dependency for the same text, and another state of the helper.
    helpers.write_text("WIDTH = 'broken'\n")
    broken = file_state(str(helpers))
    assert broken is not None
    shadow = str(root / "torch.py")
    cache.store(request, _result(request, {str(helpers): broken, shadow: ABSENT}, "error"))
    assert cache.lookup(request) is not None  # the broken one, under its own list

    helpers.write_text("WIDTH = 4\n")  # restored: the first result holds again
    assert cache.lookup(request) == first
    # A new cache object (a restarted server) reads the same manifest.
    assert ResultCache(tmp_path / "cache").lookup(request) == first


def test_the_manifest_keeps_a_bounded_number_of_lists_newest_first(tmp_path: Path) -> None:
    root, helpers, request = _project(tmp_path)
    cache = ResultCache(tmp_path / "cache")
    good = file_state(str(helpers))
    assert good is not None
    results = []
    for i in range(MANIFEST_LISTS + 1):
        results.append(_result(request, {str(helpers): good, **{str(root / f"m{j}.py"): ABSENT for j in range(i)}}, "ok"))
        cache.store(request, results[-1])
    assert cache.lookup(request) == results[-1]  # the newest list is tried first
    (root / f"m{MANIFEST_LISTS - 1}.py").write_text("")  # the newest lists no longer hold
    (root / f"m{MANIFEST_LISTS - 2}.py").write_text("")
    assert cache.lookup(request) == results[MANIFEST_LISTS - 2]
    (root / "m0.py").write_text("")  # every list kept names m0.py but the oldest, dropped
    assert cache.lookup(request) is None
