"""``$/progress`` work-done progress while an export runs ("exporting Counter (1/2)").

Only when the client said ``window.workDoneProgress``: the token is created with
``window/workDoneProgress/create`` first, as the spec requires for server-initiated
progress. The create request is not awaited on the export's path: messages queue
up in order and a small task sends them once the client accepted the token.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import TYPE_CHECKING, Protocol

from lsprotocol import types

if TYPE_CHECKING:
    from pygls.progress import Progress

    from exportlens.server.client import ClientProfile

log = logging.getLogger(__name__)

CREATE_TIMEOUT_S = 10.0
_tokens = itertools.count(1)


class ProgressHost(Protocol):
    """What a progress sequence uses of the server (``host.Host`` has it, and names
    ``JobProgress``: so this module names only these members, not ``Host``)."""

    @property
    def client(self) -> ClientProfile: ...

    @property
    def work_done_progress(self) -> Progress: ...


class JobProgress:
    """One begin/report.../end sequence. All methods are safe no-ops when unsupported."""

    def __init__(self, server: ProgressHost, title: str, message: str) -> None:
        self._server = server
        self._queue: asyncio.Queue[tuple[str, str, int | None]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._ended = False
        if server.client.progress:
            self._task = asyncio.get_running_loop().create_task(self._send(title, message))

    def report(self, message: str, percentage: int | None = None) -> None:
        if self._task is not None and not self._ended:
            self._queue.put_nowait(("report", message, percentage))

    def end(self, message: str) -> None:
        if self._task is not None and not self._ended:
            self._ended = True
            self._queue.put_nowait(("end", message, None))

    async def _send(self, title: str, message: str) -> None:
        progress = self._server.work_done_progress
        token = f"exportlens-{next(_tokens)}"
        try:
            await asyncio.wait_for(progress.create_async(token), CREATE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - a client that refuses progress just gets none
            log.info("the client did not create progress token %s", token)
            return
        try:
            progress.begin(token, types.WorkDoneProgressBegin(title=title, message=message, percentage=0, cancellable=False))
            while True:
                kind, text, percentage = await self._queue.get()
                if kind == "end":
                    progress.end(token, types.WorkDoneProgressEnd(message=text))
                    return
                progress.report(token, types.WorkDoneProgressReport(message=text, percentage=percentage))
        finally:
            progress.tokens.pop(token, None)  # pygls keeps every token otherwise
