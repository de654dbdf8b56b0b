"""Fixes outside the editor: ``check --fix``, ``--diff``, ``--unsafe-fixes``, and the
``fixes`` of ``--format json``, as ruff names them.

A check's results give each diagnostic its candidate fixes (``core/fixes``); each is
verified in a worker (``core/fixes/verified``: the fixed text exported again, the
program's outputs compared with the model's) before anything shows or applies it.
``--fix`` applies the verified preferred fixes (``--unsafe-fixes``: the others too,
one per diagnostic), writes each file once, and checks again to report what remains;
``--diff`` prints the same edits as a unified diff and writes nothing.

A notebook's fixes are computed and verified on its module (its code cells,
``core/project/notebooks.py``) and applied to the cells their lines are in: the
notebook is written back with only those cells' sources changed, and ``--diff``
shows each changed cell (``a/nb.ipynb:cell 3``), as ruff does. A fix that would
edit across cells, or a line IPython's syntax was neutralised on, is not applied.
"""

from __future__ import annotations

import difflib
import itertools
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from exportlens.core.fixes import Fix, apply
from exportlens.core.fixes.model import TextEdit
from exportlens.core.fixes.verified import Offered, has_candidates, overlap, verify
from exportlens.core.model.results import Diagnostic, FileResult
from exportlens.core.pipeline import Pipeline
from exportlens.core.project import notebooks

DEADLINE_S = 120.0  # per file: what verifying its fixes may take in all
_ids = itertools.count(1 << 30)  # request ids of their own: never a check's


def diagnostic_key(d: Diagnostic, result_path: str) -> tuple[Any, ...]:
    """One diagnostic, wherever a report shows it (its file's entry, or the declaring file's)."""
    return (d.code, os.path.realpath(d.path or result_path), d.line, d.column, d.target, d.message)


def _read(path: str) -> str | None:
    """A file's text; a notebook's module's (what its fixes are computed on)."""
    if notebooks.is_notebook(path):
        try:
            return notebooks.read(path).text
        except (OSError, notebooks.NotebookError):
            return None
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


@dataclass
class Found:
    """Each diagnostic's verified fixes (by ``diagnostic_key``)."""

    fixes: dict[tuple[Any, ...], list[Offered]]

    def of(self, d: Diagnostic, result_path: str) -> list[Offered]:
        return self.fixes.get(diagnostic_key(d, result_path), [])


def find(results: Iterable[FileResult], pipeline: Pipeline) -> Found:
    """The verified fixes of every declaring file's diagnostics; a worker pool starts
    only when some diagnostic has a candidate."""
    wanted = [r for r in results if r.targets and has_candidates(r, _read)]
    found = Found({})
    if not wanted:
        return found
    from exportlens.core.isolation.pool import WorkerPool

    method = pipeline.start_method(wanted[0].path)
    # One worker: ``verify`` waits for each job, file after file (a second would only import torch).
    with WorkerPool(jobs=1, start_method=method) as pool:

        def run(request: Any) -> FileResult:
            return next(iter(pool.run([request])))

        for result in wanted:
            request = pipeline.request(result.path, id=next(_ids))
            for offered in verify(request, result, run, _read, deadline_s=DEADLINE_S, next_id=lambda: next(_ids)):
                found.fixes.setdefault(diagnostic_key(offered.fix.diagnostic, result.path), []).append(offered)
    return found


def fix_json(fix: Fix, shown: Any, result_path: str | None = None) -> dict[str, Any]:
    """A fix in ``--format json``: edits with their file written as ``path`` is; an
    edit of a notebook (``result_path``'s own, or its ``path``) counts its lines in
    the cell ``cell`` names."""
    read: dict[str, NotebookEdits | None] = {}
    edits = []
    for e in fix.edits:
        out: dict[str, Any] = {"path": shown(e.path) if e.path else None, "line": e.line, "column": e.column, "end_line": e.end_line, "end_column": e.end_column, "new_text": e.new_text}
        file = os.path.realpath(e.path or result_path or "")
        if notebooks.is_notebook(file) and _in_cells(file, [e], read):
            held = read[file]
            found = held.cell_edit(e) if held is not None else None
            if found is not None:
                out.update(line=found[1].line, end_line=found[1].end_line, cell=found[0])
        edits.append(out)
    return {"title": fix.title, "preferred": fix.preferred, "edits": edits}


def chosen(found: Found, *, unsafe: bool) -> list[Fix]:
    """One fix per diagnostic: its preferred one; with ``unsafe``, else its first.
    A fix offered for several diagnostics (one edit, two targets) counts once."""
    out: list[Fix] = []
    seen: set[tuple[TextEdit, ...]] = set()
    for offered in found.fixes.values():
        pick = next((o.fix for o in offered if o.fix.preferred), None)
        if pick is None and unsafe and offered:
            pick = offered[0].fix
        if pick is not None and pick.edits not in seen:
            seen.add(pick.edits)
            out.append(pick)
    return out


def fixed_texts(fixes: list[Fix]) -> tuple[dict[str, tuple[str, str]], int]:
    """Path -> (old text, new text) after applying ``fixes`` that do not touch what an
    earlier one edits (ruff's rule: one pass, the rest on the next run); how many applied."""
    edits: dict[str, list[TextEdit]] = {}
    applied = 0
    notebooks_read: dict[str, NotebookEdits | None] = {}
    for fix in fixes:
        mine: dict[str, list[TextEdit]] = {}
        for e in fix.edits:
            mine.setdefault(os.path.realpath(e.path or ""), []).append(e)
        if any(overlap(e, o) for p, es in mine.items() for e in es for o in edits.get(p, [])):
            continue
        if not all(_in_cells(p, es, notebooks_read) for p, es in mine.items()):
            continue  # an edit no cell holds: this fix is not applied, the others are
        for p, es in mine.items():
            edits.setdefault(p, []).extend(es)
        applied += 1
    out = {}
    for path, es in edits.items():
        if notebooks.is_notebook(path):
            held = notebooks_read.get(path)
            if held is not None:
                out[path] = held.applied(es)
            continue
        old = _read(path)
        if old is not None:
            out[path] = (old, apply(old, es))
    return out, applied


def _in_cells(path: str, edits: list[TextEdit], read: dict[str, NotebookEdits | None]) -> bool:
    """Every edit of a notebook lands in one cell (a ``.py`` file's always do)."""
    if not notebooks.is_notebook(path):
        return True
    if path not in read:
        read[path] = NotebookEdits.read(path)
    held = read[path]
    return held is not None and all(held.cell_edit(e) is not None for e in edits)


@dataclass
class NotebookEdits:
    """Edits of a notebook's module as edits of its cells."""

    data: bytes
    cells: list[notebooks.Cell]
    module: notebooks.NotebookModule

    @classmethod
    def read(cls, path: str) -> NotebookEdits | None:
        try:
            with open(path, "rb") as f:
                data = f.read()
            cells = notebooks.read_cells(data)
        except (OSError, notebooks.NotebookError):
            return None
        return cls(data, cells, notebooks.module_of(cells, notebooks.pyproject_names(path)))

    def cell_edit(self, e: TextEdit) -> tuple[int, TextEdit] | None:
        """``(cell, the edit in its lines)``; None for an edit across cells or on a line
        whose IPython syntax was neutralised (the cell holds other text there). An end
        at the start of the line after a cell (a whole-line edit of its last line) is
        the cell's end."""
        start = self.module.place(e.line)
        if start is None:
            return None
        cell, at = start
        shift = at - e.line
        end = self.module.place(e.end_line)
        span = next(s for s in self.module.spans if s.cell == cell)
        if (end is None or end[0] != cell) and not (e.end_line == span.first + span.lines and e.end_column == 1):
            return None
        module_lines = self.module.text.split("\n")
        source = notebooks.cell_text(self.cells[cell - 1]).split("\n")
        for line in range(e.line, min(e.end_line, span.first + span.lines - 1) + 1):
            if line - 1 >= len(module_lines) or line + shift - 1 >= len(source) or module_lines[line - 1] != source[line + shift - 1]:
                return None
        return cell, TextEdit(e.line + shift, e.column, e.end_line + shift, e.end_column, e.new_text)

    def applied(self, edits: list[TextEdit]) -> tuple[str, str]:
        """The notebook's JSON before and after ``edits`` (each one a cell's)."""
        per_cell: dict[int, list[TextEdit]] = {}
        for e in edits:
            found = self.cell_edit(e)
            assert found is not None, e  # fixed_texts took only fixes whose edits are
            per_cell.setdefault(found[0], []).append(found[1])
        texts = {}
        for number, es in per_cell.items():
            text = notebooks.cell_text(self.cells[number - 1])
            last = len(text.split("\n"))
            if not text.endswith("\n") and any(e.end_line > last for e in es):
                text += "\n"  # a whole-line edit of the last line: the line ends first
            texts[number] = apply(text, es)
        return self.data.decode("utf-8-sig"), notebooks.with_cells(self.data, texts)


def _notebook_fixed(path: str, edits: list[TextEdit]) -> tuple[str, str] | None:
    """The notebook's JSON before and after ``edits`` (made on its module) are applied
    to its cells; None when one edit is not a cell's own (see ``NotebookEdits.cell_edit``)."""
    held = NotebookEdits.read(path)
    if held is None or not all(held.cell_edit(e) is not None for e in edits):
        return None
    return held.applied(edits)


def unified_diff(changes: dict[str, tuple[str, str]], shown: Any) -> str:
    out: list[str] = []
    for path in sorted(changes):
        old, new = changes[path]
        name = shown(path)
        if notebooks.is_notebook(path):  # each changed cell, not the JSON
            before, after = notebooks.read_cells(old.encode("utf-8")), notebooks.read_cells(new.encode("utf-8"))
            for number, (a, b) in enumerate(zip(before, after, strict=True), start=1):
                if a.text != b.text:
                    out += difflib.unified_diff(a.text.splitlines(keepends=True), b.text.splitlines(keepends=True), f"a/{name}:cell {number}", f"b/{name}:cell {number}")
            continue
        out += difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{name}", f"b/{name}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out)


def write(changes: dict[str, tuple[str, str]]) -> None:
    from exportlens.core.disk.atomic import write_atomic

    for path, (_, new) in changes.items():
        mode = os.stat(path).st_mode & 0o777
        write_atomic(path, new.encode("utf-8"), mode=mode)


def say(text: str) -> None:
    print(text, file=sys.stderr)
