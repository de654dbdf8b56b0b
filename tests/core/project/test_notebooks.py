"""A notebook as the module of its code cells (``core/project/notebooks.py``)."""

from __future__ import annotations

import json

import pytest

from exportlens.core.project import notebooks
from exportlens.core.project.files import declares_targets, survey
from exportlens.core.project.notebooks import Cell, NotebookError, module_of, read_cells
from tests.notebooks import MODEL_CELLS, notebook_json, write_notebook


def test_the_module_is_the_code_cells_in_order_with_ipython_syntax_neutralised() -> None:
    module = module_of(read_cells(notebook_json(MODEL_CELLS)))
    lines = module.text.splitlines()
    assert lines[0] == "pass  # %matplotlib inline"
    assert lines[3] == "pass  # !nvidia-smi"
    assert "# A model" not in module.text  # markdown is not code
    compile(module.text, "nb.ipynb", "exec")
    # Every module line maps to its cell and back.
    assert [s.cell for s in module.spans] == [2, 3, 5, 6]
    for line in range(1, len(lines) + 1):
        cell, at = module.place(line)
        assert module.line_of(cell, at) == line
        assert lines[line - 1] == _cell_lines(MODEL_CELLS[cell - 1][1], cell == 2)[at - 1]
    assert module.place(len(lines) + 1) is None


def _cell_lines(text: str, magics: bool) -> list[str]:
    lines = text.split("\n")
    return [f"pass  # {line}" if magics and line[:1] and line[:1] in "%!" else line for line in lines]


def test_cells_after_the_last_declaring_cell_never_run_and_do_not_change_the_module() -> None:
    module = module_of(read_cells(notebook_json(MODEL_CELLS)))
    assert module.after == (7,)
    assert "TRAINED" not in module.text
    assert "cell 7, after the last cell that declares a target (6)" in module.describe()
    trained = [*MODEL_CELLS[:-1], ("code", "train(model, epochs=5)"), ("markdown", "edited words")]
    assert module_of([Cell(k, t) for k, t in trained]).text == module.text


def test_a_cell_marked_skip_and_a_cell_magic_never_run() -> None:
    cells = [Cell("code", "import torch"), Cell("code", "# exportlens: skip\ndownload()"), Cell("code", "%%bash\nls -l"), Cell("code", "model = torch.nn.ReLU()\nexample_args = (torch.ones(1),)")]
    module = module_of(cells)
    assert [s.cell for s in module.spans] == [1, 4]
    assert module.skipped == (2,) and module.cell_magics == (3,)
    assert "download" not in module.text and "ls -l" not in module.text


def test_python_that_compiles_is_left_alone_and_assignments_from_magics_assign_none() -> None:
    text = 'doc = """\n!important\n%s\n"""\n'
    assert module_of([Cell("code", text + "model = 1\n")]).text == text + "model = 1\n"
    module = module_of([Cell("code", "files = !ls\n    \nif True:\n    %time f()\nmodel = 1")])
    assert module.text.splitlines()[:4] == ["files = None  # !ls", "    ", "if True:", "    pass  # %time f()"]


def test_a_pyproject_entry_s_function_is_a_needed_cell() -> None:
    cells = [Cell("code", "import torch"), Cell("code", "def make():\n    return torch.nn.ReLU(), (torch.ones(1),)"), Cell("code", "train()")]
    assert [s.cell for s in module_of(cells, ["make"]).spans] == [1, 2]
    assert module_of(cells).spans == ()  # nothing declared: nothing runs


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "not a JSON object"),
        (b'{"nbformat": 3, "worksheets": []}', "nbformat 3"),
        (b'{"nbformat": 4}', "no list of cells"),
        (b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": 7}]}', "cell 1's source"),
    ],
)
def test_what_is_not_a_notebook_says_why(data: bytes, why: str) -> None:
    with pytest.raises(NotebookError, match=why):
        read_cells(data)


def test_a_folder_check_finds_notebooks_that_declare_in_code_not_in_markdown(tmp_path) -> None:
    write_notebook(tmp_path / "model.ipynb")
    words = write_notebook(tmp_path / "words.ipynb", [("markdown", "example_args and @exportlens.target")])
    assert survey([str(tmp_path)]).files == [str(tmp_path / "model.ipynb")]
    assert not declares_targets(str(words), words.read_bytes())
    broken = tmp_path / "broken.ipynb"
    broken.write_bytes(b"{")
    assert declares_targets(str(broken), b"{")  # checked, so that the check says why
    assert notebooks.read(str(tmp_path / "model.ipynb")).after == (7,)


def test_with_cells_replaces_only_the_cells_given() -> None:
    data = notebook_json(MODEL_CELLS)
    out = json.loads(notebooks.with_cells(data, {3: "def helper(x):\n    return x\n"}))
    before = json.loads(data)
    assert out["cells"][2]["source"] == ["def helper(x):\n", "    return x\n"]
    out["cells"][2]["source"] = before["cells"][2]["source"]
    assert out == before
