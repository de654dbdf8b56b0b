"""Real nbformat-4 notebooks for the tests: markdown between code cells, a line
magic, a shell escape, a helper in one cell failing when a model in another calls
it, and a last cell that trains (it must never run: it writes ``TRAINED``)."""

from __future__ import annotations

import json
from pathlib import Path

MODEL_CELLS: list[tuple[str, str]] = [
    ("markdown", "# A model\nWords about `example_args` in markdown declare nothing."),
    ("code", "%matplotlib inline\nimport torch\nfrom torch import nn\n!nvidia-smi"),
    ("code", "def helper(x):\n    if x.sum() > 0:\n        return x + 1\n    return x - 1\n"),
    ("markdown", "## The model"),
    ("code", "class Net(nn.Module):\n    def forward(self, x):\n        return helper(x)\n"),
    ("code", "model = Net()\nexample_args = (torch.randn(3),)"),
    ("code", "import pathlib\npathlib.Path(__file__).with_name('TRAINED').write_text('ran')\nfor epoch in range(10**9):\n    pass"),
]
HELPER_CELL, HELPER_LINE = 3, 2  # where the data-dependent branch is
MODEL_CELL = 5  # the class Net
# The helper's branch made exportable: the same cells, with torch.where.
FIXED_HELPER = "def helper(x):\n    return torch.where(x.sum() > 0, x + 1, x - 1)\n"


def notebook_json(cells: list[tuple[str, str]]) -> str:
    return json.dumps(
        {
            "nbformat": 4,
            "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}, "language_info": {"name": "python"}},
            "cells": [
                {
                    "cell_type": kind,
                    "id": f"cell-{i}",
                    "metadata": {},
                    "source": text.splitlines(keepends=True),
                    **({"outputs": [], "execution_count": None} if kind == "code" else {}),
                }
                for i, (kind, text) in enumerate(cells)
            ],
        },
        indent=1,
    )


def write_notebook(path: Path, cells: list[tuple[str, str]] | None = None) -> Path:
    path.write_text(notebook_json(MODEL_CELLS if cells is None else cells), encoding="utf-8")
    return path
