"""A Jupyter notebook in VS Code's own notebook editor (issue 49), in code-server.

The test writes a real nbformat 4 notebook the way people keep them: markdown between
the code cells, a line magic (``%matplotlib inline``), a shell escape (``!pip list``),
a model that exports, a model whose export fails on a data-dependent branch, and a
training cell at the end that must never run (it writes a marker file, then raises).
code-server opens it from the Explorer in VS Code's built-in notebook editor (the
``jupyter-notebook`` type of its built-in ipynb extension), with no kernel and no
Jupyter extension. Then ``test/e2e/run.mjs`` (``mode: "notebook"``) checks that:

- opening the notebook alone activates the extension and starts the server;
- the client syncs it as a notebook (``notebookDocument/didOpen`` in the LSP trace);
- the export error shows in the Problems panel and as an underline in its own cell,
  at the line within the cell that ``exportlens check`` reports for the same file;
- the hover on a ``forward`` argument in a cell is exportlens's (``USER_INPUT``);
- no other cell is underlined, and the training cell never ran (no marker file).

The kit, the ``.vsix`` and the runner are test_vscode.py's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import check_json
from tests.editors.test_vscode import (  # noqa: F401 (kit, vsix, node_modules: fixtures)
    VENV_PYTHON,
    _run_e2e,
    _traced_params,
    kit,
    node_modules,
    vsix,
)

NOTEBOOK = "gates.ipynb"
# The cells, numbered from 1 as Jupyter and ``exportlens check`` count them.
MODEL_CELL = 5  # Scale: exports
GATE_CELL = 7  # Gate: fails, data-dependent
TRAINING_CELL = 9  # after the last target: never runs


def _cells(marker: Path) -> list[tuple[str, str]]:
    return [
        ("markdown", "# Two models in a notebook\n\nexportlens exports the models the cells declare."),
        ("code", "%matplotlib inline\nimport torch\nfrom torch import nn\n\nimport exportlens"),
        ("code", "!pip list"),
        ("markdown", "## A model that exports"),
        (
            "code",
            "@exportlens.target(example_args=(torch.randn(2, 8),))\n"
            "class Scale(nn.Module):\n"
            "    def forward(self, x):\n"
            "        return x * 2",
        ),
        ("markdown", "## A model that does not: it branches on a value"),
        (
            "code",
            "class Gate(nn.Module):\n"
            "    def forward(self, x):\n"
            "        if x.sum() > 0:\n"
            "            return x + 1\n"
            "        return x - 1\n"
            "\n"
            "\n"
            "model = Gate()\n"
            "example_args = (torch.randn(4),)",
        ),
        ("markdown", "## Training\n\nLoads data and trains for hours: exportlens must not run it."),
        (
            "code",
            "from pathlib import Path\n"
            "\n"
            f"Path({str(marker)!r}).write_text('the training cell ran')\n"
            "raise RuntimeError('the training cell ran')",
        ),
    ]


def _write_notebook(path: Path, marker: Path) -> None:
    """An nbformat 4.5 notebook as Jupyter saves it: sources as lists of lines, cell ids."""
    cells: list[dict[str, Any]] = []
    for number, (kind, text) in enumerate(_cells(marker), start=1):
        cell: dict[str, Any] = {
            "cell_type": kind,
            "id": f"cell-{number}",
            "metadata": {},
            "source": text.splitlines(keepends=True),
        }
        if kind == "code":
            cell |= {"execution_count": None, "outputs": []}
        cells.append(cell)
    notebook = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook, indent=1) + "\n")


def _line_in_cell(marker: Path, cell: int, code: str) -> int:
    kind, text = _cells(marker)[cell - 1]
    assert kind == "code", (cell, kind)
    for number, line in enumerate(text.splitlines(), start=1):
        if code in line:
            return number
    raise AssertionError(f"no {code!r} in cell {cell}")


@pytest.mark.timeout(3600)  # a cold machine installs and builds code-server first (minutes)
def test_notebook_editor_shows_the_error_in_its_cell_and_the_hover(
    kit: dict[str, str],  # noqa: F811
    vsix: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    assert VENV_PYTHON.exists(), "run scripts/setup first"
    marker = tmp_path / "training-ran"
    notebook = tmp_path / "workspace" / NOTEBOOK
    _write_notebook(notebook, marker)

    # What the CLI reports for the same file: the editor must show it, at the same cell and line.
    code, report = check_json(str(notebook))
    assert code == 1, report  # Gate fails to export
    expected = [
        {"cell": d.get("cell"), "line": d["line"], "code": d["code"], "severity": d["severity"]}
        for f in report["files"]
        for d in f["diagnostics"]
    ]
    branch = _line_in_cell(marker, GATE_CELL, "if x.sum() > 0:")
    must = {"cell": GATE_CELL, "line": branch, "code": "data-dependent", "severity": "error"}
    assert must in expected, (must, expected)
    assert not marker.exists(), "exportlens check ran the training cell"

    forward = "def forward(self, x):"
    result = _run_e2e(
        kit,
        vsix,
        "notebook",
        mode="notebook",
        workspaceFiles=[str(notebook)],
        notebook={
            "file": NOTEBOOK,
            "problems": expected,
            "hover": {"cell": MODEL_CELL, "code": forward, "argument": "x", "expect": "USER_INPUT"},
        },
    )

    # The client synced the notebook as one: every cell (markdown too, so the server
    # numbers cells as Jupyter and the CLI do), by cell URIs.
    (opened,) = _traced_params(result["output"], "Sending notification 'notebookDocument/didOpen'")
    assert opened["notebookDocument"]["notebookType"] == "jupyter-notebook", opened
    assert opened["notebookDocument"]["uri"].endswith(f"/{NOTEBOOK}"), opened
    kinds = [kind for kind, _ in _cells(marker)]
    assert [d["languageId"] for d in opened["cellTextDocuments"]] == ["python" if k == "code" else "markdown" for k in kinds], opened
    assert all(d["uri"].startswith("vscode-notebook-cell:") for d in opened["cellTextDocuments"]), opened
    # Not a second time as plain text documents.
    assert not re.search(r"Sending notification 'textDocument/didOpen'[^\n]*\n[^\n]*vscode-notebook-cell", result["output"])

    # The Problems panel: the error at the cell's own line, nothing from the training cell.
    rows = [r for r in result["problems"] if "data-dependent" in r and f"[Ln {branch}, Col " in r]
    assert rows, result["problems"]
    assert not [r for r in result["problems"] if "the training cell ran" in r], result["problems"]
    # Its row clicked: the notebook editor showed Gate's cell, the cursor at the branch's
    # line, underlined there.
    total = len(_cells(marker))
    (jump,) = [j for j in result["notebook"]["jumps"] if j["problem"] == must]
    assert f"Cell {GATE_CELL} of {total}" in jump["statusBar"], jump["statusBar"]
    assert jump["cell"]["index"] == GATE_CELL and jump["cell"]["cursorLine"] == branch, jump["cell"]
    assert jump["cell"]["lines"][str(branch)].strip() == "if x.sum() > 0:", jump["cell"]
    # Each cell as the notebook editor drew it once the exports were done: the error
    # underline in Gate's cell at the branch's line, underlines only where the CLI
    # reports something, never in the training cell.
    cells = {c["index"]: c for c in result["notebook"]["cells"]}
    assert set(cells) == set(range(1, total + 1)), cells
    assert {"severity": "error", "line": branch} in cells[GATE_CELL]["squiggles"], cells[GATE_CELL]
    underlined = {n for n, c in cells.items() if c["squiggles"]}
    assert underlined == {d["cell"] for d in expected}, {n: cells[n]["squiggles"] for n in underlined}
    assert not cells[TRAINING_CELL]["squiggles"], cells[TRAINING_CELL]
    # The hover on forward's argument in Scale's cell: the exported program's input.
    assert "USER_INPUT" in result["notebook"]["hover"], result["notebook"]["hover"]
    assert re.search(r"\bx\b", result["notebook"]["hover"]), result["notebook"]["hover"]

    # The training cell after the last target never ran, in the editor as in the CLI.
    assert not marker.exists(), marker.read_text()
    shots = {Path(p).name for p in result["screenshots"]}
    assert {"vscode-notebook-problems.png", "vscode-notebook-hover.png"} <= shots, shots
