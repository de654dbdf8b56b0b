"""Every output format puts a diagnostic in the file its line is in (issue 22).

The package-layout project of ``tests/workspaces.py``: the target is declared in
``mymodels/net.py`` (through pyproject.toml), its data-dependent branch is at
``mymodels/blocks.py:20``. Each format must name ``blocks.py`` at line 20 -- net.py has
a line 20 too, so a diagnostic placed in the declaring file lands on an unrelated
line -- and write related locations' paths as it writes the diagnostic's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.e2e.test_ci_formats import validate
from tests.workspaces import MYMODELS_BLOCKS, mymodels_workspace

BRANCH = next(i for i, line in enumerate(MYMODELS_BLOCKS.splitlines(), 1) if "if x.sum() > 0:" in line)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mymodels")
    mymodels_workspace(folder)
    return folder


def _check(project: Path, *options: str) -> str:
    proc = run_cli("check", *options, cwd=project)
    assert proc.returncode == 1, proc.stderr  # the data-dependent branch is an error
    return proc.stdout


def test_branch_line_is_twenty() -> None:
    assert BRANCH == 20  # the premise of every test below


def test_json_names_the_module_and_writes_related_paths_as_paths(project: Path) -> None:
    doc = json.loads(_check(project, "--format", "json"))
    [entry] = doc["files"]
    assert entry["path"] == "mymodels/net.py"
    [d] = entry["diagnostics"]
    assert (d["code"], d["file"], d["line"]) == ("data-dependent", "mymodels/blocks.py", BRANCH)
    # related[].path is written as path is: relative to the current folder, like `file`.
    assert [r["path"] for r in d["related"]] == ["mymodels/net.py"]


def test_text_and_concise_name_the_module(project: Path) -> None:
    full = _check(project, "--no-signatures")
    assert full.startswith(f"mymodels/blocks.py:{BRANCH}:9: error[data-dependent]: "), full
    assert f"{BRANCH} |         if x.sum() > 0:" in full
    assert "= note: mymodels/net.py:18: found exporting target `make_net`" in full
    concise = _check(project, "--output-format", "concise", "--no-signatures", "--quiet").splitlines()
    assert len(concise) == 1 and concise[0].startswith(f"mymodels/blocks.py:{BRANCH}:9: error[data-dependent]: ")


def test_github_annotates_the_module(project: Path) -> None:
    lines = _check(project, "--format", "github").splitlines()
    [annotation] = [line for line in lines if line.startswith("::")]
    assert annotation.startswith(f"::error file=mymodels/blocks.py,line={BRANCH},col=9,endLine={BRANCH},endColumn=24,"), annotation
    assert "%0Amymodels/net.py:18: note: found exporting target `make_net`" in annotation


def _location(item: dict[str, Any]) -> tuple[str, int, int]:
    physical = item["physicalLocation"]
    return physical["artifactLocation"]["uri"], physical["region"]["startLine"], physical["region"]["startColumn"]


def test_sarif_locates_the_module_and_validates(project: Path) -> None:
    log = json.loads(_check(project, "--format", "sarif"))
    validate(log)
    [result] = log["runs"][0]["results"]
    assert result["ruleId"] == "data-dependent"
    [location] = result["locations"]
    assert _location(location) == ("mymodels/blocks.py", BRANCH, 9)
    assert location["physicalLocation"]["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
    # The region is measured on blocks.py's line: the statement's end there.
    assert location["physicalLocation"]["region"]["endColumn"] == len("        if x.sum() > 0:") + 1
    assert [_location(r) for r in result["relatedLocations"]] == [("mymodels/net.py", 18, 1)]
