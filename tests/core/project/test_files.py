"""Which files are model files (``declares_targets``, ``walk``) and their project root."""

from __future__ import annotations

from pathlib import Path

import pytest

from exportlens.core.project.files import SKIP_DIRS, declares_targets, root_of, walk


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
    files, missing = walk([str(tmp_path), str(tmp_path / "helper.py"), str(tmp_path / "nope.py")])
    # A file named explicitly is checked even if it declares nothing; each file once.
    assert files == sorted([str(tmp_path / "model.py"), str(tmp_path / "helper.py"), str(tmp_path / "sub" / "deep.py")])
    assert missing == [str(tmp_path / "nope.py")]
