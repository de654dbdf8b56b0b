"""``check --format github``: GitHub Actions workflow commands, one per diagnostic.

``::error file=F,line=L,col=C,endLine=..,endColumn=..,title=T::MESSAGE`` printed by
a step becomes an annotation on that line of the pull request, with no action or
upload in between. GitHub reads one command per line, so the message's newlines and
the characters that delimit the command are percent-escaped as its runner expects
(``%``, CR and LF in the message; also ``:`` and ``,`` in the properties). A
notebook's line is counted in its cell, which the title and the message name.
"""

from __future__ import annotations

from typing import Iterable

from exportlens.core.model.results import Diagnostic, FileResult, Severity
from exportlens.formats.columns import Columns
from exportlens.report import display_path

COMMAND: dict[Severity, str] = {"error": "error", "warning": "warning", "information": "notice", "hint": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(path: str, d: Diagnostic, columns: Columns, cwd: str | None = None) -> str:
    """The command for ``d`` of the result for ``path``: annotated in the file its line
    is in (a local module, ``d.path``, when the code is there), so GitHub puts it on
    that file's line, not on the same number of the declaring file."""
    path = d.path or path
    cell, shown = columns.cells.diagnostic(path, d)
    start = columns.char_column(path, d.line, d.column)
    props = {"file": display_path(path, cwd), "line": str(shown.line), "col": str(start)}
    if shown.end_line is not None and d.end_line is not None and d.end_column is not None and (d.end_line, d.end_column) > (d.line, d.column):
        props["endLine"] = str(shown.end_line)
        props["endColumn"] = str(columns.char_column(path, d.end_line, d.end_column))
    props["title"] = f"exportlens {d.code}" + (f" ({d.target})" if d.target else "") + (f" in cell {cell}" if cell is not None else "")
    # A notebook's annotation lands on its file; the message says the cell and line.
    message = f"{display_path(path, cwd)}:cell {cell}:{shown.line}:{start}: {d.message}" if cell is not None else d.message
    for r in d.related:
        r_cell, r_shown = columns.cells.related(r)
        where = display_path(r.path, cwd) + (f":cell {r_cell}" if r_cell is not None else "")
        message += f"\n{where}:{r_shown.line}: note: {r.message}"
    head = ",".join(f"{k}={escape_property(v)}" for k, v in props.items())
    return f"::{COMMAND.get(d.severity, 'error')} {head}::{escape_data(message)}"


def annotations(results: Iterable[FileResult], cwd: str | None = None) -> list[str]:
    columns = Columns()
    return [annotation(r.path, d, columns, cwd) for r in results for d in r.diagnostics]
