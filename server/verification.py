"""Verified fixes for an open document, found after its diagnostics are out.

A published result's diagnostics may have candidate fixes (``core/fixes``); none is
offered before a worker has exported the fixed text and compared the program's
outputs with the model's (``core/fixes/verified``). That runs here, as a task of its
own started once the diagnostics are published, so a diagnostic never waits for its
fixes: its jobs go to the same workers as exports, one verification request at a
time, on a thread of its own (``verify`` waits for each; ``threads.VERIFY``). A newer version of the
document, or its close, cancels the task and kills the job it waits for, so the
document's next export never queues behind its verification (another file's export
may wait for the one verification job running, about one export's time).

When it is done, the document's ``fixes`` hold what was verified for that very
result (``fixes_for``), code actions offer them (``features/actions``), and the
client hears ``exportlens/fixesVerified`` with the document, its version and the
count: an editor may show a light bulb then, and tests wait on it instead of sleeping.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from exportlens.core.fixes.verified import Offered, has_candidates, verify
from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import FileResult
from exportlens.server.notebook_cells import exported_text

if TYPE_CHECKING:
    from exportlens.server.host import Host
    from exportlens.server.state import DocumentState

log = logging.getLogger(__name__)

NOTIFICATION = "exportlens/fixesVerified"
DEADLINE_S = 60.0  # all of a document's verification, after which what was verified is offered


class _Stopped(Exception):
    """The document moved on: stop verifying."""


def _read(server: Host, path: str) -> str | None:
    """A user file as the editor has it, else as saved (from the verification's thread
    too: a document opened or closed meanwhile makes it read the disk)."""
    try:
        for state in list(server.documents.values()):
            if os.path.realpath(state.path) == path:
                return exported_text(server.notebooks, state.uri, state.path, server.workspace.get_text_document(state.uri).source)
    except (RuntimeError, KeyError):
        pass
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def start(server: Host, state: DocumentState, pairs: list[tuple[ExportRequest, FileResult]], only: str | None = None) -> None:
    """Verify the fixes of ``pairs`` (each a declaring file's request and the result it
    made) for ``state``'s current result; ``only``: the diagnostics in that file alone
    (an open model module's view). Cancels the document's earlier verification."""
    cancel(state)
    shown = state.result
    state.fixes, state.fixes_for = [], shown
    if shown is None:
        return
    wanted = [(r, res) for r, res in pairs if has_candidates(res, lambda p: _read(server, p), only)]
    if not wanted:
        _done(server, state, [])  # nothing to verify: the client knows at once
        return
    state.fixing = asyncio.ensure_future(_verify(server, state, shown, wanted, only))


def cancel(state: DocumentState) -> None:
    task, state.fixing = state.fixing, None
    if task is not None and not task.done():
        task.cancel()


async def _verify(server: Host, state: DocumentState, shown: FileResult, pairs: list[tuple[ExportRequest, FileResult]], only: str | None) -> None:
    loop = asyncio.get_running_loop()
    stopped = threading.Event()
    waiting: set[Future[FileResult]] = set()
    pipeline = server.pipeline

    def run(request: ExportRequest) -> FileResult:
        if stopped.is_set():
            raise _Stopped
        call = asyncio.run_coroutine_threadsafe(server.bridge.export(request, pipeline.preload_dir(request.path), pipeline.start_method(request.path)), loop)
        waiting.add(call)
        if stopped.is_set():  # cancelled between the check and the add: nobody else will
            call.cancel()
        try:
            return call.result()
        except BaseException as e:  # cancelled with the task: the bridge killed the job
            raise _Stopped from e
        finally:
            waiting.discard(call)

    def all_of() -> list[Offered]:
        out: list[Offered] = []
        for request, result in pairs:
            if only is not None:
                from dataclasses import replace

                result = replace(result, diagnostics=tuple(d for d in result.diagnostics if os.path.realpath(d.path or result.path) == only))
            try:
                out += verify(request, result, run, lambda p: _read(server, p), deadline_s=DEADLINE_S, next_id=server.bridge.next_id)
            except _Stopped:
                break
            except Exception:  # noqa: BLE001 - a bug of ours: no fixes for this file, the server goes on
                log.exception("verifying the fixes of %s failed", request.path)
        return out

    try:
        offered = await loop.run_in_executor(server.threads.verify, all_of)  # it waits on jobs: not on ``io``
    except asyncio.CancelledError:
        stopped.set()
        for call in list(waiting):
            call.cancel()
        raise
    if state.result is not shown or server.documents.get(state.uri) is not state:
        return  # a newer result (or a close) came while it ran
    _done(server, state, offered)


def _done(server: Host, state: DocumentState, offered: list[Offered]) -> None:
    state.fixes, state.fixes_for = offered, state.result
    params: dict[str, Any] = {"uri": state.uri, "version": state.result_version, "fixes": len(offered)}
    server.notify(NOTIFICATION, params)
    log.info("%s: %d verified fix%s", os.path.basename(state.path), len(offered), "es" * (len(offered) != 1))
