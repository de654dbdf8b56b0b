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

from exportlens.cells import Cells
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
    cells = Cells()
    edits = []
    for e in fix.edits:
        out: dict[str, Any] = {"path": shown(e.path) if e.path else None, "line": e.line, "column": e.column, "end_line": e.end_line, "end_column": e.end_column, "new_text": e.new_text}
        file = e.path or result_path
        cell, line = cells.place(file, e.line) if file else (None, e.line)
        end_cell, end_line = cells.place(file, e.end_line) if file else (None, e.end_line)
        if cell is not None and end_cell == cell:
            out.update(line=line, end_line=end_line, cell=cell)
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
    for fix in fixes:
        mine: dict[str, list[TextEdit]] = {}
        for e in fix.edits:
            mine.setdefault(os.path.realpath(e.path or ""), []).append(e)
        if any(overlap(e, o) for p, es in mine.items() for e in es for o in edits.get(p, [])):
            continue
        for p, es in mine.items():
            edits.setdefault(p, []).extend(es)
        applied += 1
    out = {}
    for path, es in edits.items():
        if notebooks.is_notebook(path):
            changed = _notebook_fixed(path, es)
            if changed is not None:
                out[path] = changed
            continue
        old = _read(path)
        if old is not None:
            out[path] = (old, apply(old, es))
    return out, applied


def _notebook_fixed(path: str, edits: list[TextEdit]) -> tuple[str, str] | None:
    """The notebook's JSON before and after ``edits`` (made on its module) are applied
    to its cells; None when one edit is not a cell's own (see the module docstring)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        cells = notebooks.read_cells(data)
        module = notebooks.module_of(cells, notebooks.pyproject_names(path))
    except (OSError, notebooks.NotebookError):
        return None
    module_lines = module.text.split("\n")
    per_cell: dict[int, list[TextEdit]] = {}
    for e in edits:
        start, end = module.place(e.line), module.place(e.end_line)
        if start is None or end is None or start[0] != end[0]:
            return None
        source = notebooks.cell_text(cells[start[0] - 1]).split("\n")
        for line, at in ((e.line, start[1]), (e.end_line, end[1])):
            if at > len(source) or module_lines[line - 1] != source[at - 1]:
                return None  # a neutralised line: the cell holds other text there
        shift = start[1] - e.line
        per_cell.setdefault(start[0], []).append(TextEdit(e.line + shift, e.column, e.end_line + shift, e.end_column, e.new_text))
    texts = {n: apply(notebooks.cell_text(cells[n - 1]), es) for n, es in per_cell.items()}
    return data.decode("utf-8"), notebooks.with_cells(data, texts)


def unified_diff(changes: dict[str, tuple[str, str]], shown: Any) -> str:
    out: list[str] = []
    for path in sorted(changes):
        old, new = changes[path]
        name = shown(path)
        if notebooks.is_notebook(path):  # each changed cell, not the JSON
            before, after = notebooks.read_cells(old), notebooks.read_cells(new)
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
