"""An open ``pyproject.toml`` shows what is wrong with its ``[tool.exportlens]``.

A pyproject.toml that does not parse, or whose ``targets`` entry names a file or a
function that is not there, is an error located in pyproject.toml (``check`` reports
it there too). Two sources, one view:

- what the text says by itself (``core.project.settings.target_problems``, torch-free):
  a TOML error, a malformed section or ``targets``, an entry naming no file. Read
  from the buffer, so it follows the typing;
- what only running the named file tells (its function is not there, misspelt): the
  diagnostics the model files' results locate in this pyproject.toml, from the open
  documents, else the cache, else an export (as a model module's view gets them,
  ``views.result_of``). Those were made from the pyproject *on disk* (what the export
  read), so they are shown only while the buffer is the saved text; a save shows them
  again (the model files' exports depend on their pyproject.toml).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING

from exportlens.core.model.results import Diagnostic, FileResult
from exportlens.core.project.settings import find_pyproject, target_problems
from exportlens.core.project.settings import read as read_settings
from exportlens.server.features import diagnostics
from exportlens.server.open_modules import result_of
from exportlens.server.positions import split_lines

if TYPE_CHECKING:
    from exportlens.server.host import Host
    from exportlens.server.state import DocumentState

log = logging.getLogger(__name__)

NAME = "pyproject.toml"


def is_pyproject(path: str) -> bool:
    return os.path.basename(path) == NAME


def _disk_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            return f.read()
    except OSError:
        return None


def _named_files(path: str) -> list[str]:
    """The model files the saved pyproject's ``targets`` name (that exist)."""
    files = {entry.rpartition(":")[0] for entry in read_settings(path).targets}
    return sorted(f for f in files if os.path.isfile(f))


def _located_here(results: list[FileResult], path: str) -> list[Diagnostic]:
    """The results' diagnostics located in this pyproject.toml, each once."""
    real = os.path.realpath(path)
    out: dict[tuple[object, ...], Diagnostic] = {}
    for r in results:
        for d in r.diagnostics:
            if d.path is not None and os.path.realpath(d.path) == real:
                here = Diagnostic(d.code, d.message, d.line, d.column, d.end_line, d.end_column, d.target, d.related, d.level)
                out.setdefault((d.code, d.line, d.column, d.message, d.target), here)
    return list(out.values())


async def show(server: Host, state: DocumentState, generation: int) -> None:
    """Publish the problems of the open pyproject.toml ``state``."""
    loop = asyncio.get_running_loop()
    document = server.workspace.get_text_document(state.uri)
    text, version = document.source, document.version
    problems = await loop.run_in_executor(server.threads.io, target_problems, state.path, text)
    found = [Diagnostic("target-error", p.message, p.line, p.column) for p in problems]
    saved = await loop.run_in_executor(server.threads.io, _disk_text, state.path)
    if saved == text and not any(p.entry == "" for p in problems):
        files = await loop.run_in_executor(server.threads.io, _named_files, state.path)
        results = [r for r, _ in [await result_of(server, f) for f in files] if r is not None]
        found += _located_here(results, state.path)
    if not server.scheduler.is_latest(state.uri, generation) or server.documents.get(state.uri) is not state:
        return  # a newer version (or a close) came in
    state.result = FileResult(path=state.path, diagnostics=tuple(found)).sorted()
    state.result_lines, state.result_version = split_lines(text), version
    diagnostics.publish(server, state)


def refresh(server: Host, result: FileResult) -> None:
    """A model file's result changed: show its project's open pyproject.toml again."""
    pyproject = find_pyproject(result.path)
    if pyproject is None:
        return
    real = os.path.realpath(pyproject)
    for uri, state in list(server.documents.items()):
        if state.pyproject and os.path.realpath(state.path) == real:
            server.scheduler.schedule(uri, delay=False)


def stale(server: Host, paths: set[str]) -> None:
    """Files changed on disk: an open pyproject.toml depends on itself (saved or
    checked out) and on the files its ``targets`` name (created, deleted)."""
    for uri, state in list(server.documents.items()):
        if not state.pyproject:
            continue
        deps = {os.path.realpath(state.path)} | {os.path.realpath(f) for f in _named_files(state.path)}
        if deps & paths:
            server.scheduler.schedule(uri, delay=False)
