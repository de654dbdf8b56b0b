"""The text report's shape as a new user meets it (issue 22): a clean report starts
with its first target, not a blank line; ``show`` takes a folder as ``check`` does; a
folder without a model file says how model files are found."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.workspaces import mymodels_workspace

CLEAN = "import torch\n\nmodel = torch.nn.Linear(2, 2)\nexample_args = (torch.randn(1, 2),)\n"


def test_a_clean_report_starts_with_its_first_target(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(CLEAN)
    proc = run_cli("check", "m.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Linear (m.py:3): ok, exported in "), proc.stdout
    show = run_cli("show", "m.py", cwd=tmp_path)
    assert show.stdout.startswith("Linear (m.py:3): ok"), show.stdout


def test_show_takes_a_folder(tmp_path: Path) -> None:
    mymodels_workspace(tmp_path)
    proc = run_cli("show", "mymodels", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr  # the block's data-dependent branch
    assert "no such file" not in proc.stderr
    assert "mymodels/blocks.py:20:9: error[data-dependent]:" in proc.stdout
    assert "make_net (mymodels/net.py:18): error" in proc.stdout


def test_show_of_nothing_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli("show", "missing", cwd=tmp_path)
    assert proc.returncode == 2 and "missing: no such file or folder" in proc.stderr


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_folder_without_models_says_how_models_are_found(tmp_path: Path, fmt: str) -> None:
    (tmp_path / "helpers.py").write_text("SCALE = 2\n")
    proc = run_cli("check", "--format", fmt, str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no model file found in" in proc.stderr
    assert "example_args" in proc.stderr and "@exportlens.target" in proc.stderr and "[tool.exportlens] targets" in proc.stderr
