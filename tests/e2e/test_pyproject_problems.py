"""A broken ``pyproject.toml`` never passes CI (issue 22): a file that does not parse,
or a ``targets`` entry naming a function that is not there, is an error located in
pyproject.toml -- in every format, once, and without side effects (a misspelt target
is not also a removed one)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli
from tests.e2e.test_ci_formats import validate
from tests.workspaces import MYMODELS_BLOCKS, MYMODELS_PYPROJECT, mymodels_workspace

UNCLOSED = MYMODELS_PYPROJECT.replace("[tool.exportlens]", "[tool.exportlens")
HEADER_LINE = MYMODELS_PYPROJECT.splitlines().index("[tool.exportlens]") + 1
ENTRY_LINE = HEADER_LINE + 1
CLEAN_BLOCKS = MYMODELS_BLOCKS.replace("if x.sum() > 0:", "if x.shape[0] > 0:")
GLOBALS_MODEL = "import torch\n\nmodel = torch.nn.Linear(2, 2)\nexample_args = (torch.randn(1, 2),)\n"


def test_an_unparsable_pyproject_whose_targets_are_only_there_fails_the_check(tmp_path: Path) -> None:
    mymodels_workspace(tmp_path, pyproject=UNCLOSED)
    proc = run_cli("check", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # was 0: "Checked 0 files ... no diagnostics"
    [entry] = json.loads(proc.stdout)["files"]
    assert entry["path"] == "pyproject.toml"
    [d] = entry["diagnostics"]
    assert (d["code"], d["severity"], d["line"], d["column"]) == ("target-error", "error", HEADER_LINE, len("[tool.exportlens") + 1)
    assert "Expected ']'" in d["message"] and d["message"].endswith("its targets are ignored")

    github = run_cli("check", "--format", "github", cwd=tmp_path).stdout
    assert github.startswith(f"::error file=pyproject.toml,line={HEADER_LINE},"), github
    sarif = json.loads(run_cli("check", "--format", "sarif", cwd=tmp_path).stdout)
    validate(sarif)
    [result] = sarif["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert (location["artifactLocation"]["uri"], location["region"]["startLine"]) == ("pyproject.toml", HEADER_LINE)


def test_with_a_model_file_beside_it_the_error_is_in_pyproject_once(tmp_path: Path) -> None:
    mymodels_workspace(tmp_path, pyproject=UNCLOSED)
    (tmp_path / "mymodels" / "ok.py").write_text(GLOBALS_MODEL)
    proc = run_cli("check", "--no-signatures", "--output-format", "concise", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stdout.splitlines() if "error[" in line]
    # Not at the model file's line 1; said once, though the model file's export saw it too.
    assert len(errors) == 1 and errors[0].startswith(f"pyproject.toml:{HEADER_LINE}:17: error[target-error]: "), proc.stdout


def test_a_misspelt_target_is_at_its_entry_and_not_also_a_removed_target(tmp_path: Path) -> None:
    mymodels_workspace(tmp_path, blocks=CLEAN_BLOCKS)
    assert run_cli("snapshot", cwd=tmp_path).returncode == 0
    (tmp_path / "pyproject.toml").write_text(MYMODELS_PYPROJECT.replace(":make_net", ":make_nett"))
    proc = run_cli("check", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    diagnostics = [d for f in json.loads(proc.stdout)["files"] for d in f["diagnostics"]]
    [d] = diagnostics  # no "recorded ... but no longer declared" beside it
    assert (d["code"], d["file"], d["line"], d["target"]) == ("target-error", "pyproject.toml", ENTRY_LINE, "make_nett")
    entry_text = MYMODELS_PYPROJECT.splitlines()[ENTRY_LINE - 1].replace(":make_net", ":make_nett")
    assert d["column"] == entry_text.index('"') + 1 and d["end_column"] == entry_text.rindex('"') + 2
    assert "net.py has no function `make_nett` (did you mean `make_net`?)" in d["message"]


def test_an_edit_of_the_pyproject_moves_its_diagnostic(tmp_path: Path) -> None:
    """The result is cached; the entry's line in pyproject.toml is part of it."""
    mymodels_workspace(tmp_path, blocks=CLEAN_BLOCKS, pyproject=MYMODELS_PYPROJECT.replace(":make_net", ":make_nett"))
    first = json.loads(run_cli("check", "--format", "json", cwd=tmp_path).stdout)
    assert [d["line"] for f in first["files"] for d in f["diagnostics"]] == [ENTRY_LINE]
    (tmp_path / "pyproject.toml").write_text("# a comment first\n" + (tmp_path / "pyproject.toml").read_text())
    second = json.loads(run_cli("check", "--format", "json", cwd=tmp_path).stdout)
    assert [d["line"] for f in second["files"] for d in f["diagnostics"]] == [ENTRY_LINE + 1]
