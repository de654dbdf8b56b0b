"""``exportlens check`` after an edit of comments and blank lines only: the result
comes from the cache with every line moved, and it is exactly what a fresh export
of the edited file says (``--no-cache``), never a stale or shifted answer."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.conftest import EXAMPLES, check_json, run_cli

MODELS = ("data_dependent.py", "errors.py", "dynamic_shapes.py", "multi_targets.py")


def _without_times(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The files without their export times and where the result came from (the cache or this run)."""
    for f in doc["files"]:
        f.pop("from")
        for t in f["targets"]:
            t.pop("export_ms")
    return doc["files"]


def _project(folder: Path, names: tuple[str, ...] = MODELS) -> Path:
    folder.mkdir()
    (folder / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 60\n")
    for name in names:
        shutil.copy(EXAMPLES / name, folder / name)
    return folder


def _insert_comments(path: Path, after: int) -> None:
    lines = path.read_text().split("\n")
    lines[after:after] = ["# moved down", "", "    # an indented comment", ""]
    path.write_text("# a header comment\n" + "\n".join(lines))


def test_comment_edits_are_served_moved_and_match_a_fresh_export(tmp_path: Path) -> None:
    project = _project(tmp_path / "proj")
    cache = str(tmp_path / "cache")
    check_json(str(project), extra=("--cache-dir", cache))
    for name in MODELS:
        _insert_comments(project / name, 6)

    proc = run_cli("check", "--cache-dir", cache, str(project))
    assert f"({len(MODELS)} files from the cache)" in proc.stdout, proc.stdout + proc.stderr
    _, moved = check_json(str(project), extra=("--cache-dir", cache))
    _, fresh = check_json(str(project), extra=("--no-cache",))
    assert _without_times(moved) == _without_times(fresh)
    lines = [d["line"] for f in moved["files"] for d in f["diagnostics"]]
    assert lines and all(line > 5 for line in lines)  # every one moved below the insertion


def test_a_code_edit_still_exports(tmp_path: Path) -> None:
    project = _project(tmp_path / "proj", ("data_dependent.py",))
    cache = str(tmp_path / "cache")
    check_json(str(project), extra=("--cache-dir", cache))
    path = project / "data_dependent.py"
    path.write_text("# note\n" + path.read_text().replace("x = x + 1", "x = x + 2"))
    proc = run_cli("check", "--cache-dir", cache, str(project))
    assert "from the cache" not in proc.stdout, proc.stdout


def test_a_model_that_reads_its_own_lines_is_exported_again(tmp_path: Path) -> None:
    """``inspect`` can see line numbers: a moved line may change what such a model
    does, so only identical bytes reuse its result."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 60\n")
    path = project / "lines.py"
    path.write_text(
        "import inspect\n\nimport torch\nfrom torch import nn\n\n\n"
        "class Lines(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x * inspect.currentframe().f_lineno\n\n\n"
        "model = Lines()\nexample_args = (torch.ones(2),)\n"
    )
    check_json(str(project), extra=("--cache-dir", str(tmp_path / "cache")))
    path.write_text("# moved\n" + path.read_text())
    proc = run_cli("check", "--cache-dir", str(tmp_path / "cache"), str(project))
    assert "from the cache" not in proc.stdout, proc.stdout
