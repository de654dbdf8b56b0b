"""``exportlens check`` on a Jupyter notebook, through the real command: places as
``nb.ipynb:cell 3:2:5`` in every format, the training cell after the model never
runs, an edit after the model or in markdown is no re-export, and a fix to a cell
is one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.notebooks import FIXED_HELPER, HELPER_CELL, HELPER_LINE, MODEL_CELL, MODEL_CELLS, write_notebook


def _check(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exportlens", "check", "--cache-dir", str(folder / ".cache"), *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONWARNINGS="ignore", NO_COLOR="1"),
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("notebook")
    write_notebook(folder / "nb.ipynb")
    return folder


def test_json_places_each_diagnostic_and_target_in_its_cell(project: Path) -> None:
    proc = _check(project, "--format", "json", "nb.ipynb")
    assert proc.returncode == 1, proc.stderr
    [file] = json.loads(proc.stdout)["files"]
    [d] = file["diagnostics"]
    assert (d["code"], d["cell"], d["line"], d["column"], d["end_line"]) == ("data-dependent", HELPER_CELL, HELPER_LINE, 5, HELPER_LINE)
    # Its verified fix edits the helper's cell, at lines counted in that cell.
    [edit] = d["fixes"][0]["edits"]
    assert (edit["path"], edit["cell"], edit["line"]) == ("nb.ipynb", HELPER_CELL, HELPER_LINE)
    [target] = file["targets"]
    assert (target["name"], target["cell"], target["line"], target["status"]) == ("Net", MODEL_CELL, 1, "error")
    assert not (project / "TRAINED").exists()  # the training cell after the model never ran


def test_text_concise_github_and_sarif_name_the_cell(project: Path) -> None:
    text = _check(project, "nb.ipynb").stdout.splitlines()
    assert text[0].startswith(f"nb.ipynb:cell {HELPER_CELL}:{HELPER_LINE}:5: error[data-dependent]:")
    assert f"{HELPER_LINE} |     if x.sum() > 0:" in text  # the excerpt numbers the cell's lines
    assert f"Net (nb.ipynb:cell {MODEL_CELL}:1): error" in text
    concise = _check(project, "--output-format", "concise", "nb.ipynb").stdout.splitlines()
    assert concise[0].startswith(f"nb.ipynb:cell {HELPER_CELL}:{HELPER_LINE}:5: error[data-dependent]:")
    github = _check(project, "--format", "github", "nb.ipynb").stdout.splitlines()[0]
    assert github.startswith(f"::error file=nb.ipynb,line={HELPER_LINE},col=5,endLine={HELPER_LINE},")
    assert f"in cell {HELPER_CELL}::nb.ipynb%3Acell" not in github  # the message is data, not a property
    assert f"in cell {HELPER_CELL}::nb.ipynb:cell {HELPER_CELL}:{HELPER_LINE}:5: `if x.sum() > 0:`" in github
    sarif = json.loads(_check(project, "--format", "sarif", "nb.ipynb").stdout)
    [result] = sarif["runs"][0]["results"]
    region = result["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"], result["properties"]["cell"]) == (HELPER_LINE, 5, HELPER_CELL)


def test_an_edit_after_the_model_or_in_markdown_is_no_re_export(project: Path, tmp_path: Path) -> None:
    _check(project, "--format", "json", "nb.ipynb")  # warm, whichever test runs first
    cells = [*MODEL_CELLS]
    cells[0] = ("markdown", "# Another title")
    cells[-1] = ("code", "train(model, epochs=3)")
    write_notebook(project / "nb.ipynb", cells)
    try:
        proc = _check(project, "--format", "json", "nb.ipynb")
        [file] = json.loads(proc.stdout)["files"]
        assert file["from"] == "cache", proc.stderr
        assert file["diagnostics"][0]["cell"] == HELPER_CELL
    finally:
        write_notebook(project / "nb.ipynb")


def test_a_fixed_cell_exports_and_a_folder_check_finds_the_notebook(tmp_path: Path) -> None:
    cells = [*MODEL_CELLS]
    cells[HELPER_CELL - 1] = ("code", FIXED_HELPER)
    write_notebook(tmp_path / "nb.ipynb", cells)
    write_notebook(tmp_path / "notes.ipynb", [("markdown", "no model: `example_args` in words only")])
    proc = _check(tmp_path, "--format", "json", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [file] = json.loads(proc.stdout)["files"]
    assert file["path"] == "nb.ipynb" and file["diagnostics"] == []
    [target] = file["targets"]
    assert target["status"] == "ok" and target["signature"]["inputs"][0]["shape"] == [3]
    assert (target["signature"]["inputs"][0]["cell"], target["signature"]["inputs"][0]["line"]) == (MODEL_CELL, 2)
    # show and graph take a notebook too, with the same places.
    env = dict(os.environ, PYTHONWARNINGS="ignore", NO_COLOR="1")
    show = subprocess.run([sys.executable, "-m", "exportlens", "show", "--cache-dir", str(tmp_path / ".cache"), "nb.ipynb"], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert show.stdout.splitlines()[0].startswith(f"Net (nb.ipynb:cell {MODEL_CELL}:1): ok"), show.stdout + show.stderr
    graph = subprocess.run([sys.executable, "-m", "exportlens", "graph", "--cache-dir", str(tmp_path / ".cache"), "nb.ipynb"], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    sources = {a["value"] for g in json.loads(graph.stdout)["graphs"] for n in g["nodes"] for a in n["attrs"] if a["key"] == "source"}
    assert sources == {f"nb.ipynb:cell {MODEL_CELL}:2", f"nb.ipynb:cell {MODEL_CELL}:3"}, graph.stderr
    assert not (tmp_path / "TRAINED").exists()


def test_a_file_that_is_no_notebook_says_why_at_line_1(tmp_path: Path) -> None:
    (tmp_path / "broken.ipynb").write_text('{"nbformat": 4, "cells": [', encoding="utf-8")
    proc = _check(tmp_path, "--format", "json", "broken.ipynb")
    [d] = json.loads(proc.stdout)["files"][0]["diagnostics"]
    assert d["code"] == "syntax-error" and d["line"] == 1
    assert d["message"].startswith("the notebook cannot be read: the notebook is not valid JSON")


def test_check_fix_verifies_and_rewrites_only_the_fixed_cell(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "nb.ipynb")
    before = json.loads(path.read_text(encoding="utf-8"))
    diff = _check(tmp_path, "--diff", "nb.ipynb")
    assert f"--- a/nb.ipynb:cell {HELPER_CELL}\n+++ b/nb.ipynb:cell {HELPER_CELL}\n" in diff.stdout, diff.stderr
    assert "-    if x.sum() > 0:" in diff.stdout and "+    return torch.where(x.sum() > 0, x + 1, x - 1)" in diff.stdout
    assert json.loads(path.read_text(encoding="utf-8")) == before  # --diff writes nothing
    fixed = _check(tmp_path, "--fix", "nb.ipynb")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "Fixed 1 diagnostic in 1 file" in fixed.stderr
    after = json.loads(path.read_text(encoding="utf-8"))
    assert "".join(after["cells"][HELPER_CELL - 1]["source"]) == "def helper(x):\n    return torch.where(x.sum() > 0, x + 1, x - 1)\n"
    after["cells"][HELPER_CELL - 1]["source"] = before["cells"][HELPER_CELL - 1]["source"]
    assert after == before  # every other cell, the metadata and the ids as they were
    assert not (tmp_path / "TRAINED").exists()
