"""``check --format sarif``: one SARIF 2.1.0 log, for code scanning.

One run; its tool ``exportlens`` has one rule per diagnostic code (``helpUri``: the
code's section of docs/diagnostics.md), each result a diagnostic with its level,
message, region and related locations. A notebook's region counts lines in its cell,
which the result's ``properties.cell`` names. Paths are relative to the current folder
under the ``%SRCROOT%`` base, so that a code-scanning upload run from the checkout's
root maps them to the repository; files outside it are absolute ``file:`` URIs.
The tests validate the output against the official schema.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath
from typing import Any, Iterable
from urllib.parse import quote

from exportlens.core.model.results import CODES, Diagnostic, FileResult, Related, Severity, docs_anchor
from exportlens.formats.columns import Columns

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SRCROOT = "%SRCROOT%"
INFORMATION_URI = "https://github.com/exportlens/exportlens"
LEVEL: dict[Severity, str] = {"error": "error", "warning": "warning", "information": "note", "hint": "note"}


def to_sarif(results: Iterable[FileResult], version: str, cwd: str | None = None) -> dict[str, Any]:
    cwd = os.path.abspath(cwd or os.getcwd())
    codes = sorted(CODES)
    rule_index = {code: i for i, code in enumerate(codes)}
    columns = Columns()
    out: list[dict[str, Any]] = []
    for result in results:
        for d in result.diagnostics:
            out.append(_result(result.path, d, rule_index, columns, cwd))
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "exportlens", "version": version, "informationUri": INFORMATION_URI, "rules": [_rule(code) for code in codes]}},
                "originalUriBaseIds": {SRCROOT: {"uri": Path(cwd).as_uri().rstrip("/") + "/"}},
                "columnKind": "unicodeCodePoints",
                "results": out,
            }
        ],
    }


def _rule(code: str) -> dict[str, Any]:
    return {
        "id": code,
        "shortDescription": {"text": code},
        "helpUri": docs_anchor(code),
        "help": {"text": f"See {docs_anchor(code)}"},
        "defaultConfiguration": {"level": LEVEL[CODES[code]]},
    }


def _location(path: str, cwd: str, paths: Any = os.path, pure: type[PurePath] = Path) -> dict[str, Any]:
    """A file under ``cwd`` relative to ``%SRCROOT%``, any other as a ``file://`` URI.
    ``paths`` and ``pure`` are the platform's (a test passes ``ntpath`` and
    ``PureWindowsPath``): on Windows a file on another drive has no relative path."""
    try:
        rel = paths.relpath(path, cwd)
    except ValueError:  # Windows: another drive than cwd's
        return {"uri": pure(path).as_uri()}
    if rel == paths.pardir or rel.startswith(paths.pardir + paths.sep) or paths.isabs(rel):
        return {"uri": pure(path).as_uri()}
    return {"uri": quote(pure(rel).as_posix()), "uriBaseId": SRCROOT}


def _region(path: str, line: int, column: int, end_line: int | None, end_column: int | None, columns: Columns, offset: int = 0) -> dict[str, Any]:
    """A region in characters; a point (no end, or an end before the start) covers one
    character. ``offset``: subtracted from the lines (a notebook's, counted in their cell)."""
    line = max(1, line)
    start = columns.char_column(path, line, column)
    if end_line is None or end_column is None or (end_line, end_column) <= (line, column):
        end_line, end = line, start + 1
    else:
        end = columns.char_column(path, end_line, end_column)
    if end_line == line and end <= start:
        end = start + 1
    return {"startLine": line - offset, "startColumn": start, "endLine": end_line - offset, "endColumn": end}


def _result(path: str, d: Diagnostic, rule_index: dict[str, int], columns: Columns, cwd: str) -> dict[str, Any]:
    path = d.path or path  # the file the line is in: a local module, when the code is there
    # A notebook's lines are counted in their cell, which the result's properties name.
    cell, shown = columns.cells.diagnostic(path, d)
    end_line = d.end_line if shown.end_line is not None else None
    region = _region(path, d.line, d.column, end_line, d.end_column if end_line is not None else None, columns, d.line - shown.line)
    out: dict[str, Any] = {
        "ruleId": d.code,
        "level": LEVEL.get(d.severity, "error"),
        "message": {"text": d.message},
        "locations": [{"physicalLocation": {"artifactLocation": _location(path, cwd), "region": region}}],
    }
    if d.code in rule_index:  # a code from a newer worker has no rule: the id alone says it
        out["ruleIndex"] = rule_index[d.code]
    if d.related:
        out["relatedLocations"] = [_related(i, r, columns, cwd) for i, r in enumerate(d.related)]
    properties: dict[str, Any] = {}
    if d.target:
        properties["target"] = d.target
    if cell is not None:
        properties["cell"] = cell
    if properties:
        out["properties"] = properties
    return out


def _related(i: int, r: Related, columns: Columns, cwd: str) -> dict[str, Any]:
    cell, shown = columns.cells.related(r)
    out: dict[str, Any] = {
        "id": i,
        "physicalLocation": {"artifactLocation": _location(r.path, cwd), "region": _region(r.path, r.line, r.column, None, None, columns, r.line - shown.line)},
        "message": {"text": r.message},
    }
    if cell is not None:
        out["properties"] = {"cell": cell}
    return out
