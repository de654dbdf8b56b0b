"""Notebook places in the reports: a line of a notebook's module as its cell and
the line within it (``nb.ipynb:cell 3:5:9``, as ruff prints them). Results count a
notebook's lines in the module its code cells run as
(``exportlens.core.project.notebooks``); each notebook is read once per report. A
``.py`` file, or a notebook that cannot be read any more, keeps its lines. Torch-free.
"""

from __future__ import annotations

import dataclasses

from exportlens.core.model.results import Diagnostic, Related
from exportlens.core.project import notebooks
from exportlens.core.project.notebooks import NotebookModule


class Cells:
    """Each notebook's module, read once."""

    def __init__(self) -> None:
        self._modules: dict[str, NotebookModule | None] = {}

    def module(self, path: str) -> NotebookModule | None:
        if not notebooks.is_notebook(path):
            return None
        if path not in self._modules:
            try:
                self._modules[path] = notebooks.read(path)
            except (OSError, notebooks.NotebookError):
                self._modules[path] = None
        return self._modules[path]

    def lines(self, path: str) -> list[str] | None:
        """A notebook's module lines, for excerpts and columns; None for any other file."""
        module = self.module(path)
        return module.text.split("\n") if module is not None else None  # Python's lines: \x0c is not one

    def place(self, path: str, line: int) -> tuple[int | None, int]:
        """``(cell, line in it)`` of a notebook's line; ``(None, line)`` elsewhere."""
        module = self.module(path)
        found = module.place(line) if module is not None else None
        return found if found is not None else (None, line)

    def diagnostic(self, path: str, d: Diagnostic) -> tuple[int | None, Diagnostic]:
        """The cell of ``d`` (in the file ``path``) and ``d`` with its lines counted in
        that cell; a span that runs into the next cell ends at its own cell's end."""
        cell, line = self.place(path, d.line)
        if cell is None:
            return None, d
        end_line, end_column = d.end_line, d.end_column
        if end_line is not None:
            end_cell, end_at = self.place(path, end_line)
            end_line, end_column = (end_at, end_column) if end_cell == cell else (None, None)
        return cell, dataclasses.replace(d, line=line, end_line=end_line, end_column=end_column)

    def related(self, r: Related) -> tuple[int | None, Related]:
        cell, line = self.place(r.path, r.line)
        return cell, (dataclasses.replace(r, line=line) if cell is not None else r)
