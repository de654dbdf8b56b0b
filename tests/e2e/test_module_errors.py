"""An import that fails inside a local module is shown in that module (issue 22):
a syntax error at ``blocks.py:15``, an ``import einops`` that finds nothing at
``blocks.py:5``. Before, both were an ``import-error`` at ``net.py``'s import line,
naming the module's line in the message only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.workspaces import MYMODELS_BLOCKS, mymodels_workspace


def _with_line(number: int, text: str) -> str:
    lines = MYMODELS_BLOCKS.splitlines()
    lines[number - 1] = text
    return "\n".join(lines) + "\n"


CASES = {
    # line, its text, code, message
    "syntax": (15, "        y = = 2", "syntax-error", "SyntaxError: invalid syntax"),
    "import": (5, "import einops_is_not_installed", "import-error", "running the module raised ModuleNotFoundError: No module named 'einops_is_not_installed'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_error_is_at_the_modules_line_with_the_import_as_related(tmp_path: Path, case: str) -> None:
    line, text, code, message = CASES[case]
    mymodels_workspace(tmp_path, blocks=_with_line(line, text))
    proc = run_cli("check", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    [entry] = json.loads(proc.stdout)["files"]
    assert entry["path"] == "mymodels/net.py"
    [d] = entry["diagnostics"]
    assert (d["code"], d["file"], d["line"], d["message"]) == (code, "mymodels/blocks.py", line, message)
    assert d["column"] == len(text) - len(text.lstrip()) + (5 if case == "syntax" else 1)
    assert [(r["path"], r["line"], r["message"]) for r in d["related"]] == [("mymodels/net.py", 6, "`blocks.py` is imported here")]

    text_report = run_cli("check", "--no-signatures", cwd=tmp_path).stdout
    assert text_report.startswith(f"mymodels/blocks.py:{line}:"), text_report
    assert f"error[{code}]: {message}" in text_report

    # The module's own check: the error once, at its line (its own run and the
    # view of net.py's run say the same thing).
    proc = run_cli("check", "--format", "json", "mymodels/blocks.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    [entry] = json.loads(proc.stdout)["files"]
    assert [(d["code"], d["line"], d["message"]) for d in entry["diagnostics"]] == [(code, line, message)]
