"""Applying fixes to a notebook (``exportlens.fix_command``): an edit of its module
lands in the cell its lines are in; one across cells or on a line IPython's syntax
was neutralised on is not applied (the cell holds other text there)."""

from __future__ import annotations

import json
from pathlib import Path

from exportlens.core.fixes.model import TextEdit
from exportlens.core.project import notebooks
from exportlens.fix_command import _notebook_fixed
from tests.notebooks import MODEL_CELLS, write_notebook


def test_an_edit_lands_in_its_cell_and_nothing_else_changes(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "nb.ipynb")
    module = notebooks.read(str(path))
    line = module.line_of(5, 3)  # "        return helper(x)" in the class cell
    assert line is not None
    changed = _notebook_fixed(str(path), [TextEdit(line, 16, line, 25, "helper(x) * 2")])
    assert changed is not None
    cells = json.loads(changed[1])["cells"]
    assert "".join(cells[4]["source"]).splitlines()[2] == "        return helper(x) * 2"
    assert ["".join(c["source"]) for i, c in enumerate(cells) if i != 4] == [t for i, (_, t) in enumerate(MODEL_CELLS) if i != 4]


def test_an_edit_across_cells_or_on_a_magic_line_is_refused(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "nb.ipynb")
    module = notebooks.read(str(path))
    last_of_3, first_of_5 = module.line_of(3, 4), module.line_of(5, 1)
    assert last_of_3 is not None and first_of_5 is not None
    assert _notebook_fixed(str(path), [TextEdit(last_of_3, 1, first_of_5, 1, "")]) is None
    magic = module.line_of(2, 1)  # "%matplotlib inline", run as "pass  # %matplotlib inline"
    assert magic is not None
    assert _notebook_fixed(str(path), [TextEdit(magic, 1, magic, 1, "import torch\n")]) is None
    assert _notebook_fixed(str(path), [TextEdit(magic + 1, 1, magic + 1, 1, "import os\n")]) is not None
