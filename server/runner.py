"""The one path an open file's export takes, whichever view asked for it (its own
document, a model module's view, a pyproject's): the cache lookup off the event loop,
else a run on a warm worker -- never for an untrusted folder or an unsupported torch
-- with its ``$/progress``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING

from exportlens.core import torchversion
from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import FileResult
from exportlens.core.pipeline import Pipeline
from exportlens.server.features.work_done import JobProgress
from exportlens.server.workers import BridgeClosed

if TYPE_CHECKING:
    from exportlens.server.host import Host

log = logging.getLogger(__name__)


def summary(result: FileResult) -> str:
    ok = sum(t.status == "ok" for t in result.targets)
    errors = sum(d.severity == "error" for d in result.diagnostics)
    text = f"{ok}/{len(result.targets)} exported"
    return text + (f", {errors} error{'s' * (errors != 1)}" if errors else "")


async def lookup(server: Host, pipeline: Pipeline, request: ExportRequest) -> tuple[FileResult | None, bool]:
    """The pipeline's lookup on its own thread: hashing the file and reading the cache
    (the shared one's reads are bounded, ``exportlens.core.cache.remote``) must not
    hold up the event loop, nor wait behind the previous result's hover index on
    ``io``. Whether the shared cache served it, too."""
    await server.deferred_stores.ready_for(request, server.threads.lookups)  # a result that would serve it, still waiting to be stored
    return await asyncio.get_running_loop().run_in_executor(server.threads.lookups, pipeline.find, request)


async def run_on_worker(server: Host, request: ExportRequest) -> FileResult | None:
    name = os.path.basename(request.path)
    if not server.trust.allows(request.path):  # every export passes here: the last check
        log.warning("not exporting %s: its folder is not trusted", request.path)
        return None
    unsupported = torchversion.problem()  # also for the declaring files a module's view exports
    if unsupported is not None:
        log.warning("not exporting %s: %s", request.path, unsupported)
        return None
    progress = JobProgress(server, "exportlens", f"exporting {name}")
    server.progress_for[request.id] = progress
    try:
        result = await server.bridge.export(request, server.pipeline.preload_dir(request.path), server.pipeline.start_method(request.path))
    except asyncio.CancelledError:
        progress.end("cancelled: the file changed")
        raise
    except BridgeClosed as e:
        progress.end("stopped")
        log.info("export of %s stopped: %s", name, e)
        return None
    finally:
        server.progress_for.pop(request.id, None)
    progress.end(f"{name}: {summary(result)}")
    return result
