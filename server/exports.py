"""Export one open document: its buffer text, through the cache, else a warm worker.

Request, cache choice, lookup and store are ``exportlens.core.pipeline``'s, as for
the CLI; this module adds what only an editor needs: the worker bridge, cancelling,
progress, and lookups and stores off the event loop (on the server's io thread).

The scheduler runs ``export_document`` as the document's task. Everything before
``publish`` may be cancelled by a newer change; cancelling while a worker runs the
job kills the job. The result is published only if this run is still the latest
for the document, so an older version's diagnostics never reach the client.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING

from lsprotocol import types

from exportlens.core import torchversion
from exportlens.core.isolation.messages import ExportRequest
from exportlens.core.model.results import Diagnostic, FileResult
from exportlens.core.pipeline import Pipeline
from exportlens.core.project.files import declares_targets
from exportlens.server import overlays, pyproject_view, views
from exportlens.server.features import diagnostics, untrusted
from exportlens.server.features.hints import HintIndex
from exportlens.server.features.hover import index_class
from exportlens.server.features.progress import JobProgress
from exportlens.server.features.refresh import HINTS, LENSES, refresh
from exportlens.server.positions import split_lines
from exportlens.server.watch import changed_since
from exportlens.server.workers import BridgeClosed

if TYPE_CHECKING:
    from exportlens.server.host import Host
    from exportlens.server.state import DocumentState

log = logging.getLogger(__name__)

CONFIG_WAIT_S = 3.0  # an export waits this long at most for the client's settings


def summary(result: FileResult) -> str:
    ok = sum(t.status == "ok" for t in result.targets)
    errors = sum(d.severity == "error" for d in result.diagnostics)
    text = f"{ok}/{len(result.targets)} exported"
    return text + (f", {errors} error{'s' * (errors != 1)}" if errors else "")


async def export_document(server: Host, uri: str, generation: int) -> None:
    state = server.documents.get(uri)
    if state is None:
        return
    if not server.config_ready.is_set():
        # Settings pulled from the client may change the limits: do not export twice.
        try:
            await asyncio.wait_for(server.config_ready.wait(), CONFIG_WAIT_S)
        except asyncio.TimeoutError:
            pass
    if not server.trust.allows(state.path):
        untrusted.hold(server, state)  # nothing of an untrusted folder runs, not even a lookup
        return
    state.notice = None
    if state.pyproject:
        await pyproject_view.show(server, state, generation)
        return
    document = server.workspace.get_text_document(uri)
    text, version = document.source, document.version
    if not declares_targets(state.path, text):
        # Not a model file (or no longer one): what the targets that import it found here.
        if state.declares:
            state.declares, state.result, state.index, state.hints = False, None, None, None
            state.result_lines, state.result_version = split_lines(text), version
            diagnostics.publish(server, state)
        await views.show_module(server, state, generation)
        return
    unsupported = torchversion.problem()  # the installed metadata: the server never imports torch
    if unsupported is not None:
        _hold_for_torch(server, state, unsupported, text, version)
        return
    state.declares, state.view = True, False
    pipeline = server.pipeline  # one pipeline for lookup and store, even if settings change meanwhile
    # The project's other open modules as their buffers hold them (``overlays``).
    request = pipeline.request(state.path, id=server.bridge.next_id(), source=text, overlays=await overlays.for_export(server, state.path))
    # What the watcher knows now: a change to one of these, during the export or
    # after, raises a file event (``_recheck`` need not look at them).
    watched = tuple(state.result.local_imports) if state.result is not None and server.watcher is not None else ()
    fresh = uri in server.fresh  # exportlens.reexport: do not trust the cache
    server.fresh.discard(uri)
    result, from_store = (None, False) if fresh else await _lookup(server, pipeline, request)
    from_cache = result is not None
    log.debug("export %s #%d: %s", os.path.basename(state.path), generation, "cache hit" if from_cache else "cache miss")
    if result is None:
        result = await _run_on_worker(server, request)
        if result is None:
            return
        server.stores.submit(pipeline.store, request, result)  # never raises; the export need not wait
    if not server.scheduler.is_latest(uri, generation) or server.documents.get(uri) is not state:
        return  # a newer version (or a close) came in: this result is stale
    result = pipeline.compare(result)  # against the snapshot as it is now; never cached
    state.result, state.from_cache, state.from_store, state.failure = result, from_cache, from_store, None
    state.result_lines, state.result_version = split_lines(text), version
    state.index = state.hints = None
    # Watch what it read before the client sees the result: a change the user (or a
    # test) makes on seeing it must raise a file event.
    server.watch_dependencies()
    diagnostics.publish(server, state)
    state.index_task = asyncio.ensure_future(build_index(server, state, text, result))
    views.refresh(server, result)  # the open modules it imports show it too
    pyproject_view.refresh(server, result)  # and its open pyproject.toml, what is located there
    overlaid = [p for p, _ in request.overlays]
    server.background(_recheck(server, uri, state, result, overlaid, watched), "checking the files an export read")


def _hold_for_torch(server: Host, state: DocumentState, message: str, text: str, version: int | None) -> None:
    """The environment's torch is outside the supported range (or missing): one
    ``unsupported-torch`` error on line 1 instead of a result no tested torch made, and
    one message box. The next export probes again, so installing a supported torch
    and saving (or ``exportlens.reexport``) is enough."""
    state.declares, state.view = True, False
    state.result, state.index, state.hints, state.from_cache = None, None, None, False
    state.result_lines, state.result_version = split_lines(text), version
    state.notice = Diagnostic(code="unsupported-torch", message=message, line=1)
    diagnostics.publish(server, state)
    server.show_once(f"exportlens: {message}", types.MessageType.Error)


async def _recheck(server: Host, uri: str, state: DocumentState, result: FileResult, overlaid: list[str], watched: tuple[str, ...]) -> None:
    """Export again if a file the export read changed while it ran: the watcher only
    learnt of that file from this result, after the change, so no event will come.
    (Not a module it ran from unsaved text: ``overlaid``; nor one the watcher knew
    before: ``watched``, whose change raises its own event.)"""
    changed = await asyncio.get_running_loop().run_in_executor(server.io, changed_since, result, state.path, overlaid, watched)
    if changed and state.result is result and server.documents.get(uri) is state:
        names = ", ".join(sorted(os.path.basename(p) for p in changed))
        server.log_message(f"exportlens: {os.path.basename(state.path)} depends on files that changed during its export ({names}); exporting it again", types.MessageType.Log)
        server.scheduler.schedule(uri, delay=False)


async def _lookup(server: Host, pipeline: Pipeline, request: ExportRequest) -> tuple[FileResult | None, bool]:
    """The pipeline's lookup on the io thread: hashing the file and reading the cache
    (the shared one's reads are bounded, ``exportlens.core.cache.remote``) must not
    hold up the event loop. Whether the shared cache served it, too."""
    return await asyncio.get_running_loop().run_in_executor(server.io, pipeline.find, request)


async def _run_on_worker(server: Host, request: ExportRequest) -> FileResult | None:
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


async def build_index(server: Host, state: DocumentState, text: str, result: FileResult) -> None:
    """Build the hover index and the inlay hints for ``result`` in a thread, then
    attach them if still current and ask the client for hints and lenses again."""
    cls = index_class()
    if cls is None:
        return

    def build() -> tuple[object, HintIndex]:
        markup = server.client.markup
        return cls.build(state.path, text, result, markup), HintIndex.build(state.path, text, result, markup)

    try:
        index, hints = await asyncio.get_running_loop().run_in_executor(server.io, build)
    except Exception as e:  # noqa: BLE001 - no hovers is better than a dead server
        server.log_once(f"building hovers failed ({type(e).__name__}: {e}); hovers are off for this result")
        log.exception("HoverIndex.build failed for %s", state.path)
        return
    if state.result is result:
        state.index, state.hints = index, hints
        refresh(server, HINTS, LENSES)
