"""A Jupyter notebook as the module of its code cells. Torch-free.

A notebook (nbformat 4) runs as one module: its code cells in order, each starting
on a new line. IPython's syntax that is not Python is neutralised, as ruff does, in
a cell that does not compile as it is: a line magic (``%matplotlib inline``), a
shell escape (``!pip list``) or a help request (``obj?``) becomes ``pass``, with its
indentation; an assignment from one (``files = !ls``) assigns ``None``. A cell magic
(``%%bash``) keeps its whole cell out, except those whose body is Python
(``%%time``, ``%%timeit``, ``%%capture``). Markdown and raw cells are not code.

Only what the targets need runs. Notebooks often end in cells that load data or
train: the module ends with the last code cell that declares a target (the module
globals, the decorator, the function a ``pyproject.toml`` entry names), so the cells
after it never run, and an edit there or in a markdown cell leaves the module's
text, and so the cache key, as it was. A cell whose first line is
``# exportlens: skip`` (its first line that is not blank) never runs either.

Places: the module's line L is line ``place(L)[1]`` of cell ``place(L)[0]``, cells
numbered from 1 over all the notebook's cells, markdown included, as Jupyter shows
them and ruff prints them (``nb.ipynb:cell 3:5:9``).
"""

from __future__ import annotations

import bisect
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from exportlens.core.project.declarations import declares
from exportlens.core.project.settings import settings_for

SUFFIX = ".ipynb"
SKIP_MARK = re.compile(r"^[ \t]*#[ \t]*exportlens:[ \t]*skip\b")
# A line IPython reads and Python does not: a line magic, a shell escape, help.
_MAGIC = re.compile(r"^([ \t]*)(?:%|!|\?)")
_HELP = re.compile(r"^([ \t]*)[\w.]+[ \t]*\?\??[ \t]*$")
_FROM_MAGIC = re.compile(r"^([ \t]*[\w.]+(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*=[ \t]*)[%!]")


class NotebookError(ValueError):
    """The file is not a notebook this reads; the message says why."""


@dataclass(frozen=True)
class Cell:
    kind: str  # "code", "markdown" or "raw"
    text: str


@dataclass(frozen=True)
class Span:
    """One code cell's lines in the module."""

    cell: int  # its number in the notebook, from 1
    first: int  # the module line of its first line
    lines: int


@dataclass(frozen=True)
class NotebookModule:
    """The module a notebook runs as, and where each of its lines came from."""

    text: str
    spans: tuple[Span, ...]
    cells: int  # how many cells the notebook has, of every kind
    skipped: tuple[int, ...] = ()  # code cells marked ``# exportlens: skip``
    cell_magics: tuple[int, ...] = ()  # code cells that are a cell magic (``%%bash``)
    after: tuple[int, ...] = ()  # code cells after the last one the targets need

    def place(self, line: int) -> tuple[int, int] | None:
        """``(cell, line in the cell)`` of a module line; None past the module."""
        i = bisect.bisect_right([s.first for s in self.spans], line) - 1
        if i < 0:
            return None
        span = self.spans[i]
        if line >= span.first + span.lines:
            return None
        return span.cell, line - span.first + 1

    def line_of(self, cell: int, line: int) -> int | None:
        """The module line of a cell's line; None for a cell that does not run."""
        for span in self.spans:
            if span.cell == cell:
                return span.first + line - 1 if 1 <= line <= span.lines else None
        return None

    def describe(self) -> str:
        """What runs, for the log: ``runs cells 2, 4, 5 of 8; not 7-8, after the last
        target's cell (5); not 3, marked '# exportlens: skip'``."""
        ran = ", ".join(str(s.cell) for s in self.spans) or "none"
        out = [f"runs code cell{'s' * (len(self.spans) != 1)} {ran} of {self.cells} cells"]
        last = self.spans[-1].cell if self.spans else None
        if self.after:
            where = f" ({last})" if last is not None else ""
            out.append(f"not {_cells(self.after)}, after the last cell that declares a target{where}")
        if self.skipped:
            out.append(f"not {_cells(self.skipped)}, marked '# exportlens: skip'")
        if self.cell_magics:
            out.append(f"not {_cells(self.cell_magics)}, cell magics")
        return "; ".join(out)


def _cells(numbers: Sequence[int]) -> str:
    return ("cell " if len(numbers) == 1 else "cells ") + ", ".join(map(str, numbers))


def is_notebook(path: str) -> bool:
    return path.endswith(SUFFIX)


def read_cells(data: bytes | str) -> list[Cell]:
    """The cells of an nbformat 4 notebook's JSON; NotebookError for anything else."""
    if isinstance(data, str):
        data = data.removeprefix("\ufeff")  # a BOM: json reads one from bytes, not from text
    try:
        nb = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise NotebookError(f"the notebook is not valid JSON: {e}") from None
    if not isinstance(nb, dict):
        raise NotebookError("the notebook is not a JSON object")
    major = nb.get("nbformat")
    if isinstance(major, int) and major < 4:
        raise NotebookError(f"the notebook is nbformat {major}; exportlens reads nbformat 4 (open and save it in Jupyter to upgrade it)")
    cells = nb.get("cells")
    if not isinstance(cells, list):
        raise NotebookError("the notebook has no list of cells ('cells')")
    out = []
    for i, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            raise NotebookError(f"cell {i} of the notebook is not a JSON object")
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise NotebookError(f"cell {i}'s source is neither a string nor a list of strings")
        out.append(Cell(str(cell.get("cell_type", "code")), source))
    return out


def neutralise(text: str) -> tuple[str, bool]:
    """A code cell's text as Python, and whether it is a cell magic that does not run.
    A cell that compiles is left as it is: a ``%`` or ``!`` inside one of its strings
    is Python's, not IPython's. Only a line that starts a logical line can be IPython's
    (not one inside brackets or a triple-quoted string: ``!= 3`` there is Python's).
    The cell magics whose body is Python (``%%time``, ``%%timeit``, ``%%capture``) run
    their body, as ruff reads them."""
    lines = text.split("\n")
    at = next((i for i, line in enumerate(lines) if line.strip()), 0)
    first = lines[at].strip() if lines else ""
    if first.startswith("%%"):
        if first[2:].split(maxsplit=1)[:1] not in (["time"], ["timeit"], ["capture"]):
            return text, True
        lines[at] = f"pass  # {first}"
        text = "\n".join(lines)
    try:
        compile(text, "<cell>", "exec", dont_inherit=True)
        return text, False
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    out = []
    continued = False
    inside = _Inside()
    for line in text.split("\n"):
        if not continued and inside.open():
            out.append(line)  # inside brackets or a string: Python's
            inside.read(line)
            continue
        if continued:  # the rest of a magic continued with a backslash
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}pass  # {line.strip()}" if line.strip() else line)
            continued = line.rstrip().endswith("\\")
            continue
        m = _FROM_MAGIC.match(line)
        if m:
            out.append(f"{m.group(1)}None  # {line[m.end(1):]}")
            continued = line.rstrip().endswith("\\")
            continue
        m = _MAGIC.match(line) or _HELP.match(line)
        if m:
            out.append(f"{m.group(1)}pass  # {line.strip()}")
            continued = line.rstrip().endswith("\\")
            continue
        out.append(line)
        inside.read(line)
    return "\n".join(out), False


class _Inside:
    """Whether the next line continues a logical line: inside brackets, a
    triple-quoted string, or after a backslash. A rough reading (no tokenizer: the
    cell does not compile), enough to leave Python's own lines alone."""

    def __init__(self) -> None:
        self.depth, self.quote, self.backslash = 0, "", False

    def open(self) -> bool:
        return self.depth > 0 or bool(self.quote) or self.backslash

    def read(self, line: str) -> None:
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if self.quote:
                if c == "\\":
                    i += 2
                    continue
                if line.startswith(self.quote, i):
                    i += len(self.quote)
                    self.quote = ""
                    continue
            elif c == "#":
                break
            elif line.startswith(('"""', "'''"), i):
                self.quote = line[i : i + 3]
                i += 3
                continue
            elif c in "\"'":
                end = line.find(c, i + 1)
                i = n if end < 0 else end + 1
                continue
            elif c in "([{":
                self.depth += 1
            elif c in ")]}":
                self.depth = max(0, self.depth - 1)
            i += 1
        self.backslash = not self.quote and line.rstrip().endswith("\\")


def module_of(cells: Sequence[Cell], names: Iterable[str] = ()) -> NotebookModule:
    """The module of ``cells``; ``names``: the functions ``pyproject.toml`` entries
    name in this notebook (a cell that defines one is needed)."""
    names = tuple(names)
    code: list[tuple[int, str]] = []
    skipped, magics = [], []
    for number, cell in enumerate(cells, start=1):
        if cell.kind != "code" or not cell.text.strip():
            continue
        text = cell_text(cell)
        if SKIP_MARK.match(text.lstrip("\n")):
            skipped.append(number)
            continue
        python, is_magic = neutralise(text)
        if is_magic:
            magics.append(number)
            continue
        code.append((number, python))
    needed = [i for i, (_, python) in enumerate(code) if declares(python, names, assigned=True)]
    last = needed[-1] + 1 if needed else 0
    lines: list[str] = []
    spans = []
    for number, python in code[:last]:
        body = python[:-1] if python.endswith("\n") else python
        cell_lines = body.split("\n")
        spans.append(Span(number, len(lines) + 1, len(cell_lines)))
        lines.extend(cell_lines)
    text = "\n".join(lines) + "\n" if lines else ""
    return NotebookModule(text, tuple(spans), len(cells), tuple(skipped), tuple(magics), tuple(n for n, _ in code[last:]))


def pyproject_names(path: str) -> list[str]:
    """The functions ``[tool.exportlens] targets`` entries name in this notebook."""
    real = os.path.realpath(path)
    return [e.rpartition(":")[2] for e in settings_for(path).targets if os.path.realpath(e.rpartition(":")[0]) == real]


def read(path: str, data: bytes | None = None) -> NotebookModule:
    """The module of the notebook at ``path`` (``data``: its bytes, when read
    already); OSError when it cannot be read, NotebookError when it is no notebook."""
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    return module_of(read_cells(data), pyproject_names(path))


def with_cells(data: bytes | str, texts: dict[int, str]) -> str:
    """The notebook's JSON with the sources of the cells in ``texts`` (by number)
    replaced, everything else kept, written as Jupyter writes notebooks (one-space
    indent, UTF-8, a final newline). NotebookError when ``data`` is no notebook."""
    read_cells(data)  # says why it is no notebook
    text = data.decode("utf-8-sig") if isinstance(data, bytes) else data.removeprefix("\ufeff")
    nb = json.loads(text)
    for number, new in texts.items():
        nb["cells"][number - 1]["source"] = new.splitlines(keepends=True)
    indent = re.match(r"\{\r?\n( +)\"", text)  # the file's own indent: one space is Jupyter's
    return json.dumps(nb, indent=len(indent.group(1)) if indent else 1, ensure_ascii=False) + "\n"


def cell_text(cell: Cell) -> str:
    """A cell's text as its module lines were made from it (newlines as ``\\n``)."""
    return cell.text.replace("\r\n", "\n").replace("\r", "\n")
