"""``python -m exportlens`` drops the working directory from ``sys.path``; nothing
else that imports exportlens loses it (a user's script still imports its neighbours)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from exportlens.safe_path import running_module

PY = "/usr/bin/python3"


@pytest.mark.parametrize(
    ("argv", "orig_argv", "module"),
    [
        (["-m", "serve"], [PY, "-m", "exportlens", "serve"], "exportlens"),
        (["-m", "serve"], [PY, "-P", "-m", "exportlens", "serve"], "exportlens"),
        (["-m", "serve"], [PY, "-mexportlens", "serve"], "exportlens"),
        (["-m"], [PY, "-Im", "exportlens.cli"], "exportlens.cli"),
        (["-m"], [PY, "-Xfrozen_modules=off", "-Imexportlens"], "exportlens"),
        (["-m", "-m", "exportlens"], [PY, "-m", "pkg.model", "-m", "exportlens"], "pkg.model"),
        (["-m", "check", "m.py"], [PY, "-W", "ignore", "-m", "exportlens", "check", "m.py"], "exportlens"),
        (["/w/train.py"], [PY, "/w/train.py"], None),
        (["-c", "x"], [PY, "-c", "import exportlens", "x"], None),
        (["-m"], [], None),
        ([], [PY], None),
    ],
)
def test_the_module_python_m_is_locating(argv: list[str], orig_argv: list[str], module: str | None) -> None:
    assert running_module(argv, orig_argv) == module


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "helpers.py").write_text("VALUE = 7\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("import exportlens\n")
    (tmp_path / "pkg" / "model.py").write_text("import sys, helpers\nprint(helpers.VALUE, sys.path[0])\n")
    (tmp_path / "script.py").write_text("import sys, exportlens, helpers\nprint(helpers.VALUE, sys.path[0])\n")
    return tmp_path


@pytest.mark.parametrize(
    "args",
    [["-m", "pkg.model"], ["script.py"], ["-c", "import sys, exportlens, helpers; print(helpers.VALUE, sys.path[0])"]],
    ids=["python-m-a-user-package-that-imports-exportlens", "a-script", "python-c"],
)
def test_a_user_program_that_imports_exportlens_keeps_its_folder_on_sys_path(folder: Path, args: list[str]) -> None:
    proc = _run(args, folder)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "7"

