"""``python -m exportlens check`` run in a folder holding files named like libraries
exportlens imports (``tokenize.py``, ``attr.py``, ...): Python puts that folder first
on ``sys.path``, yet exportlens starts, and the model still imports its local helper."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import check_json, run_cli
from tests.workspaces import hostile_workspace

pytestmark = pytest.mark.adversarial



def test_check_runs_in_a_folder_that_shadows_its_libraries(tmp_path: Path) -> None:
    hostile_workspace(tmp_path)
    code, report = check_json("model.py", cwd=tmp_path, extra=("--no-cache",))
    assert code == 0
    [file] = report["files"]
    assert file["diagnostics"] == [] and [t["status"] for t in file["targets"]] == ["ok"]


def test_help_and_serve_usage_start_there_too(tmp_path: Path) -> None:
    hostile_workspace(tmp_path)
    proc = run_cli("--help", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0 and "usage: exportlens" in proc.stdout, proc.stderr
    proc = run_cli("serve", "--tcp", "nonsense", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "--tcp expects HOST:PORT" in proc.stderr, proc.stderr
