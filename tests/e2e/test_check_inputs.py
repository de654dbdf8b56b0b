"""``exportlens check`` on inputs that are not plain model files, through the real
command: a FIFO named ``*.py``, a model file it cannot read, and pyproject ``targets``
that name no file of the project.

Unreadable files: the tests run as root here, and root reads a ``chmod 000`` file
all the same (CAP_DAC_OVERRIDE). So the command runs with CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH dropped from its capability bounding set (``prctl`` before
``exec``, no LD_PRELOAD): a root without them is stopped by permission bits as any
user is, and the file really is ``chmod 000``. For anyone else the drop fails with
EPERM, which does not matter: the permission bits stop them already. The test first
checks that the file is unreadable in that setting, so it cannot pass vacuously.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.adversarial

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2
MODEL = "import torch\nmodel = torch.nn.Linear(8, 4)\nexample_args = (torch.randn(2, 8),)\n"


def _without_dac_override() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM when not root: nothing to drop


def _cli(*args: str, unprivileged: bool = False, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-m", "exportlens", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(os.environ, PYTHONWARNINGS="ignore"),
            preexec_fn=_without_dac_override if unprivileged else None,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"exportlens {' '.join(args)} hung") from None


def test_a_fifo_named_like_a_model_never_hangs_check(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text("example_args = (\n")  # a syntax error: no torch needed
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    in_folder = _cli("check", "--no-cache", str(tmp_path), timeout=120)
    assert in_folder.returncode == 1, in_folder.stderr
    assert "model.py:1:" in in_folder.stdout and "pipe.py" not in in_folder.stdout + in_folder.stderr
    by_name = _cli("check", "--no-cache", str(fifo), timeout=120)
    assert by_name.returncode == 2
    assert by_name.stderr.strip() == f"exportlens: {fifo}: not a regular file or a folder (a FIFO); exportlens checks Python files and notebooks"


@pytest.fixture
def unreadable(tmp_path: Path) -> Path:
    model = tmp_path / "proj" / "model.py"
    model.parent.mkdir()
    (model.parent / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 60\n")
    model.write_text(MODEL)
    model.chmod(0)
    probe = subprocess.run([sys.executable, "-c", f"open({str(model)!r}).read()"], capture_output=True, text=True, timeout=60, preexec_fn=_without_dac_override)
    assert "PermissionError" in probe.stderr, "the test cannot make the file unreadable here"
    return model


def test_a_model_file_it_cannot_read_is_a_clear_diagnostic(unreadable: Path, tmp_path: Path) -> None:
    for given in (unreadable, unreadable.parent):  # named, and found in a folder (no longer skipped)
        proc = _cli("check", "--format", "json", "--cache-dir", str(tmp_path / "cache"), str(given), unprivileged=True)
        assert proc.returncode == 1, proc.stderr
        (found,) = json.loads(proc.stdout)["files"]
        assert found["path"] == str(unreadable)
        assert [(d["code"], d["line"], d["message"]) for d in found["diagnostics"]] == [("import-error", 1, "cannot read the file: Permission denied")]
        assert "Traceback" not in proc.stderr and "cannot write" not in proc.stderr


def test_pyproject_targets_that_name_no_file_are_reported_in_the_pyproject(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (tmp_path / "other.py").write_text("def make(): ...\n")
    pyproject = project / "pyproject.toml"
    pyproject.write_text('[tool.exportlens]\ntimeout = 60\ntargets = [\n  "models.py:make",\n  "../other.py:make",\n]\n')
    proc = _cli("check", str(project), timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if "target-error" in line]
    assert [line.partition(" error[target-error]: ")[0] for line in lines] == [f"{pyproject}:4:3:", f"{pyproject}:5:3:"]  # at the entry's string
    assert "models.py does not exist" in lines[0] and "outside the project" in lines[1]
