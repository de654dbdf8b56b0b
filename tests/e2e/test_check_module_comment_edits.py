"""A comment-only edit of a local module the model imports (tests/corpus/tinylm:
``tinylm/gpt.py`` behind ``targets.py`` and ``factories.py``): ``check`` serves every
file from the cache with the module's lines moved -- its diagnostics, the signature
lines and class lines in it, the stack traces inside each program -- and the result
is exactly what a fresh export of the edited module says. A code edit of the module
still exports, and so does a comment edit of a module that can read its own source."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from exportlens import read_program
from exportlens.core.model.results import FileResult
from exportlens.core.pipeline import Overrides, Pipeline
from tests.conftest import ROOT, check_json, run_cli

CORPUS = ROOT / "tests" / "corpus" / "tinylm"
COMMENT = "# three lines of comments\n\n# push the classes down\n"


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "tinylm"
    shutil.copytree(CORPUS, project, ignore=shutil.ignore_patterns("__pycache__"))
    return project


def _without_times(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The files without their export times and where the result came from (the cache or this run)."""
    for f in doc["files"]:
        f.pop("from")
        for t in f["targets"]:
            t.pop("export_ms")
    return doc["files"]


def _lookup(project: Path, cache: Path, name: str) -> FileResult | None:
    pipeline = Pipeline(Overrides(cache_dir=str(cache)))
    path = str(project / "tinylm" / name)
    return pipeline.lookup(pipeline.request(path, id=1))


def _gpt_lines(result: FileResult, gpt: str) -> list[tuple[str, int]]:
    """Every line of ``gpt`` the result shows, with what shows it."""
    out = [(f"diagnostic {d.code}", d.line) for d in result.diagnostics if d.path == gpt]
    for t in result.targets:
        if t.module_class is not None and t.module_class.path == gpt:
            out.append((f"class of {t.name}", t.module_class.line))
        for spec in t.signature.inputs if t.signature else ():
            if spec.source is not None and spec.source.path == gpt:
                out.append((f"spec {spec.kind} {spec.target}", spec.source.line))
        program = read_program(t.program) if t.program else None
        for node in program.nodes if program is not None else ():
            for frame in node.frames:
                if frame.file == gpt:
                    out.append((f"node {t.name} {node.name}", frame.line))
    return sorted(out)


def test_a_comment_edit_of_a_model_module_is_served_moved(tmp_path: Path) -> None:
    project = _project(tmp_path)
    cache = tmp_path / "cache"
    _, first = check_json(str(project), cwd=project, extra=("--cache-dir", str(cache)))
    gpt = project / "tinylm" / "gpt.py"
    before = [_lookup(project, cache, name) for name in ("targets.py", "factories.py")]
    assert before[0] is not None and before[1] is not None
    lines_before = _gpt_lines(before[0], str(gpt)) + _gpt_lines(before[1], str(gpt))
    assert any(what.startswith("diagnostic data-dependent") for what, _ in lines_before)
    for kind in ("spec", "node", "class"):
        assert any(what.startswith(kind) for what, _ in lines_before), kind

    gpt.write_text(gpt.read_text().replace("class Block(", COMMENT + "class Block("))
    moved = [_lookup(project, cache, name) for name in ("targets.py", "factories.py")]
    assert moved[0] is not None and moved[1] is not None  # no export: served from the tokens manifest
    assert _gpt_lines(moved[0], str(gpt)) + _gpt_lines(moved[1], str(gpt)) == [(what, line + 3) for what, line in lines_before]
    [d] = [d for d in moved[0].diagnostics if d.path == str(gpt)]
    assert d.line == gpt.read_text().split("\n").index("        if logits.abs().max() > 100:") + 1

    proc = run_cli("check", "--cache-dir", str(cache), str(project), cwd=project)
    files = len(first["files"])
    assert f"({files} files from the cache)" in proc.stdout, proc.stdout + proc.stderr
    _, served = check_json(str(project), cwd=project, extra=("--cache-dir", str(cache)))
    _, fresh = check_json(str(project), cwd=project, extra=("--no-cache",))
    assert _without_times(served) == _without_times(fresh)


def _programs_equal(a: FileResult, b: FileResult) -> None:
    """What a fresh export stored, against what the moved lookup served."""
    for x, y in zip(a.targets, b.targets, strict=True):
        assert replace(x, export_ms=0, program=b"") == replace(y, export_ms=0, program=b"")
        if not x.program:
            assert not y.program
            continue
        px, py = read_program(x.program), read_program(y.program)
        assert [(n.name, n.source, n.frames) for n in px.nodes] == [(n.name, n.source, n.frames) for n in py.nodes]


def test_the_moved_result_is_what_a_fresh_export_stores(tmp_path: Path) -> None:
    project = _project(tmp_path)
    cache, other = tmp_path / "cache", tmp_path / "other"
    files = [str(project / "tinylm" / name) for name in ("targets.py", "factories.py")]
    run_cli("check", "--cache-dir", str(cache), *files, cwd=project)
    gpt = project / "tinylm" / "gpt.py"
    gpt.write_text(gpt.read_text().replace("class GPT(", COMMENT + "class GPT(").replace("class GatedGPT(", COMMENT + "class GatedGPT("))
    run_cli("check", "--cache-dir", str(other), *files, cwd=project)
    for name in ("targets.py", "factories.py"):
        moved, fresh = _lookup(project, cache, name), _lookup(project, other, name)
        assert moved is not None and fresh is not None
        assert moved.diagnostics == fresh.diagnostics
        _programs_equal(moved, fresh)


def test_a_code_edit_of_a_model_module_still_exports(tmp_path: Path) -> None:
    project = _project(tmp_path)
    cache = tmp_path / "cache"
    run_cli("check", "--cache-dir", str(cache), str(project / "tinylm" / "targets.py"), cwd=project)
    gpt = project / "tinylm" / "gpt.py"
    gpt.write_text(COMMENT + gpt.read_text().replace("logits.clamp(-100, 100)", "logits.clamp(-99, 99)"))
    assert _lookup(project, cache, "targets.py") is None


def test_a_module_that_reads_its_own_source_is_keyed_by_its_bytes(tmp_path: Path) -> None:
    project = _project(tmp_path)
    cache = tmp_path / "cache"
    gpt = project / "tinylm" / "gpt.py"
    gpt.write_text("import inspect\n" + gpt.read_text())
    run_cli("check", "--cache-dir", str(cache), str(project / "tinylm" / "targets.py"), cwd=project)
    assert _lookup(project, cache, "targets.py") is not None  # the same bytes hit
    gpt.write_text(gpt.read_text().replace("class GatedGPT(", COMMENT + "class GatedGPT("))
    assert _lookup(project, cache, "targets.py") is None
