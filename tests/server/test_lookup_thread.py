"""A save's cache lookup runs on the server's own lookup thread: a save right after a
result must not queue behind that result's hover index or re-check on ``io``."""

from __future__ import annotations

import asyncio
import threading

from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import FileResult
from exportlens.server import runner
from exportlens.server.app import create_server


class Found:
    def __init__(self) -> None:
        self.thread = ""

    def find(self, request: ExportRequest) -> tuple[FileResult | None, bool]:
        self.thread = threading.current_thread().name
        return FileResult(path=request.path), False


def test_a_lookup_does_not_wait_behind_the_io_thread() -> None:
    server = create_server()
    busy = threading.Event()
    release = threading.Event()

    def index_build() -> None:  # the previous result's hover index, still building
        busy.set()
        release.wait(60)

    server.threads.io.submit(index_build)
    assert busy.wait(30)
    pipeline = Found()

    async def save() -> tuple[FileResult | None, bool]:
        request = ExportRequest(id=1, path="/project/model.py")
        return await asyncio.wait_for(runner.lookup(server, pipeline, request), 30)  # type: ignore[arg-type]

    try:
        result, shared = asyncio.run(save())
    finally:
        release.set()
    assert result is not None and result.path == "/project/model.py" and not shared
    assert pipeline.thread.startswith("exportlens-lookup"), pipeline.thread
