"""Which files are model files (``declares_targets``, ``survey``) and their project root."""

from __future__ import annotations

import builtins
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from exportlens.core.project.files import SKIP_DIRS, declares_targets, root_of, survey


@pytest.mark.parametrize(
    "text, declares",
    [
        ("example_args = (1,)\n", True),
        ("import exportlens\n@exportlens.target\nclass M: ...\n", True),
        ("from exportlens import target\n", True),
        ("@target(example_args=(1,))\ndef make(): ...\n", True),
        ("my_example_args = 1\n", False),  # a word, not the global
        ("import torch\nx = torch.randn(2)\n", False),
    ],
)
def test_declaration_forms_in_the_text(tmp_path: Path, text: str, declares: bool) -> None:
    path = str(tmp_path / "m.py")
    assert declares_targets(path, text) is declares
    assert declares_targets(path, text.encode()) is declares


def test_a_file_named_by_pyproject_targets_declares(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.exportlens]\ntargets = ["pkg/models.py:make"]\n')
    (tmp_path / "pkg").mkdir()
    assert declares_targets(str(tmp_path / "pkg" / "models.py"), "def make(): ...\n")
    assert not declares_targets(str(tmp_path / "pkg" / "other.py"), "def make(): ...\n")


def test_the_root_is_the_nearest_pyproject_or_git_folder(tmp_path: Path) -> None:
    inner = tmp_path / "repo" / "src" / "pkg"
    inner.mkdir(parents=True)
    model = str(inner / "m.py")
    assert root_of(model) in (str(inner), *map(str, inner.parents))  # whatever lies above tmp_path
    (tmp_path / "repo" / ".git").mkdir()
    assert root_of(model) == str(tmp_path / "repo")
    (tmp_path / "repo" / "src" / "pyproject.toml").write_text("")
    assert root_of(model) == str(tmp_path / "repo" / "src")


def test_walk_finds_model_files_and_skips_tool_and_hidden_folders(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text("example_args = (1,)\n")
    (tmp_path / "helper.py").write_text("WIDTH = 4\n")
    for skipped in (".venv", "__pycache__", ".hidden", "build"):
        assert skipped in SKIP_DIRS or skipped.startswith(".")
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "model.py").write_text("example_args = (1,)\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.py").write_text("@target\ndef f(): ...\n")
    found = survey([str(tmp_path), str(tmp_path / "helper.py"), str(tmp_path / "nope.py")])
    # A file named explicitly is checked even if it declares nothing; each file once.
    assert found.files == sorted([str(tmp_path / "model.py"), str(tmp_path / "helper.py"), str(tmp_path / "sub" / "deep.py")])
    assert found.refused == [(str(tmp_path / "nope.py"), "no such file or directory")]
    assert found.declarations == []


# A survey in a child process: a read that blocks (a FIFO) hangs it, not the test run.
SURVEY = "import json, sys\nfrom exportlens.core.project.files import survey\nfound = survey(sys.argv[1:])\nprint(json.dumps([found.files, found.refused]))\n"


def _survey_in_child(*paths: Path) -> tuple[list[str], list[list[str]]]:
    try:
        proc = subprocess.run([sys.executable, "-c", SURVEY, *map(str, paths)], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("survey hung") from None
    assert proc.returncode == 0, proc.stderr
    files, refused = json.loads(proc.stdout)
    return files, refused


@pytest.mark.adversarial
def test_a_fifo_named_like_a_model_is_skipped_in_a_folder_and_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text("example_args = (1,)\n")
    os.mkfifo(tmp_path / "pipe.py")  # opening it to read would wait for a writer forever
    files, refused = _survey_in_child(tmp_path)
    assert (files, refused) == ([str(tmp_path / "model.py")], [])
    files, refused = _survey_in_child(tmp_path / "pipe.py")
    assert files == []
    assert refused == [[str(tmp_path / "pipe.py"), "not a regular file or a folder (a FIFO); exportlens checks Python files and notebooks"]]


def test_a_file_it_cannot_read_in_a_folder_is_checked_not_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests run as root, whom permission bits do not stop: every way to open
    ``secret.py`` is made to fail with EACCES, as ``chmod 000`` does for anyone else
    (tests/e2e/test_check_inputs.py runs the real command on a real chmod 000 file)."""
    (tmp_path / "model.py").write_text("example_args = (1,)\n")
    (tmp_path / "secret.py").write_text("example_args = (1,)\n")

    def denying(real: Any) -> Any:
        def opener(path: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(path, (str, os.PathLike)) and os.path.basename(path) == "secret.py":
                raise PermissionError(13, "Permission denied", str(path))
            return real(path, *args, **kwargs)

        return opener

    monkeypatch.setattr(os, "open", denying(os.open))
    monkeypatch.setattr(builtins, "open", denying(builtins.open))
    assert survey([str(tmp_path)]).files == [str(tmp_path / "model.py"), str(tmp_path / "secret.py")]


def test_pyproject_targets_naming_no_file_are_target_errors_in_the_pyproject(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "models.py").write_text("def make(): ...\n")
    (tmp_path / "elsewhere.py").write_text("def make(): ...\n")
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.exportlens]\ntimeout = 30\ntargets = [\n'
        '  "pkg/models.py:make",\n  "pkg/missing.py:make",\n  "../elsewhere.py:make",\n  "pkg:make",\n]\n'
    )
    for given in (project, project / "pkg" / "models.py"):
        (result,) = survey([str(given)]).declarations
        assert result.path == str(project / "pyproject.toml")
        assert [(d.code, d.line) for d in result.diagnostics] == [("target-error", 8), ("target-error", 9), ("target-error", 10)]
        missing, outside, folder = (d.message for d in result.diagnostics)
        assert "'pkg/missing.py:make'" in missing and "does not exist" in missing
        assert "outside the project" in outside
        assert "not a regular file" in folder
    (project / "pyproject.toml").write_text('[tool.exportlens]\ntargets = ["pkg/models.py:make"]\n')
    assert survey([str(project)]).declarations == []
