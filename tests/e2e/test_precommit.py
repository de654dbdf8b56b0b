"""The pre-commit hooks of ``.pre-commit-hooks.yaml`` through the real tool:
``pre-commit try-repo`` installs this checkout the way a user's pre-commit installs
it (``exportlens-check`` in its own virtualenv, torch included) and runs every hook
in a model repository: clean, then after a commit that changes only a helper module.

Each ``try-repo`` builds its environment from nothing (about a minute here: torch
comes from the machine's wheel folder, the rest from the package index).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.slow

MODEL = textwrap.dedent(
    '''\
    import torch
    from torch import nn

    from layers import WIDTH


    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, WIDTH)

        def forward(self, x):
            return self.fc(x)


    model = Head()
    example_args = (torch.randn(2, 8),)
    '''
)


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=exportlens tests", "-c", "user.email=tests@exportlens.invalid", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def hooks_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout as it is on disk, committed to a repository of its own: try-repo
    on the working tree itself would take the tracked files' edits but not new files."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    repo = tmp_path_factory.mktemp("hooks-repo")
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():  # listed but deleted in the working tree: left out
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    assert (repo / ".pre-commit-hooks.yaml").is_file()
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "exportlens as checked out")
    return repo


@pytest.fixture
def models_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "models"
    repo.mkdir()
    (repo / "pyproject.toml").write_text('[project]\nname = "models"\n')
    (repo / "head.py").write_text(MODEL)
    (repo / "layers.py").write_text("WIDTH = 4\n")
    assert run_cli("snapshot", cwd=repo).returncode == 0
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "models and their snapshot")
    return repo


def try_repo(hooks: Path, models: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # exportlens-check-system runs the `python` on PATH: this environment's.
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""), PYTHONWARNINGS="ignore")
    env.pop("PRE_COMMIT_HOME", None)
    pre_commit = [sys.executable, "-m", "pre_commit"]
    return subprocess.run([*pre_commit, "try-repo", str(hooks), *args], cwd=models, capture_output=True, text=True, env=env, timeout=900)


def test_a_clean_project_passes_every_hook(hooks_repo: Path, models_repo: Path) -> None:
    proc = try_repo(hooks_repo, models_repo, "--all-files")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [line for line in proc.stdout.splitlines() if line.startswith("exportlens check")]
    assert len(results) == 3 and all(line.endswith("Passed") for line in results), proc.stdout


def test_a_commit_that_changes_only_a_helper_fails_at_the_models_return(hooks_repo: Path, models_repo: Path) -> None:
    """The hook checks the project, not the changed files: head.py is not in the
    commit, and its output is what the edit of layers.py broke."""
    (models_repo / "layers.py").write_text("WIDTH = 6\n")
    git(models_repo, "add", "layers.py")
    proc = try_repo(hooks_repo, models_repo, "--files", "layers.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    results = [line for line in proc.stdout.splitlines() if line.startswith("exportlens check")]
    assert len(results) == 3 and all(line.endswith("Failed") for line in results), proc.stdout
    line = MODEL.splitlines().index("        return self.fc(x)") + 1
    expected = f"head.py:{line}:9: error[signature-changed]: output 0: float32[2, 4] -> float32[2, 6] [Head]"
    assert proc.stdout.count(expected) == 3, proc.stdout  # once per hook: a signature change has no fix
