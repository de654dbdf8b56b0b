"""Export one open document: its buffer text, through the cache, else a warm worker.

Request, cache choice, lookup and store are ``exportlens.core.pipeline``'s, as for
the CLI; this module adds what only an editor needs: the worker bridge, cancelling,
progress, and lookups and stores off the event loop (on the server's lookups' and
stores' threads: ``exportlens.server.threads``).

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
from exportlens.core.model.results import Diagnostic, FileResult
from exportlens.core.project.files import declares_targets
from exportlens.core.watch import changed_since
from exportlens.server import indexes, open_modules, overlays, pyproject_view, runner, verification
from exportlens.server.features import diagnostics, graph_view, untrusted
from exportlens.server.notebook_cells import exported_text
from exportlens.server.positions import split_lines
from exportlens.server.state import Mode

if TYPE_CHECKING:
    from exportlens.server.host import Host
    from exportlens.server.state import DocumentState

log = logging.getLogger(__name__)

CONFIG_WAIT_S = 3.0  # an export waits this long at most for the client's settings


async def export_document(server: Host, uri: str, generation: int) -> None:
    state = server.documents.get(uri)
    if state is None:
        return
    verification.cancel(state)  # its jobs must not hold up this export's
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
    text = exported_text(server.notebooks, uri, state.path, text)  # a notebook sent as text: its module
    if not declares_targets(state.path, text):
        # Not a model file (or no longer one): what the targets that import it found here.
        if state.declares:
            state.enter(Mode.IDLE, "declares no target any more")
            state.drop_result()
            state.result_lines, state.result_version = split_lines(text), version
            diagnostics.publish(server, state)
        await open_modules.show_module(server, state, generation)
        return
    unsupported = torchversion.problem()  # the installed metadata: the server never imports torch
    if unsupported is not None:
        _hold_for_torch(server, state, unsupported, text, version)
        return
    state.enter(Mode.MODEL, "declares targets")
    pipeline = server.pipeline  # one pipeline for lookup and store, even if settings change meanwhile
    # The project's other open modules as their buffers hold them (``overlays``).
    request = pipeline.request(state.path, id=server.bridge.next_id(), source=text, overlays=await overlays.for_export(server, state.path))
    # What the watcher knows now: a change to one of these, during the export or
    # after, raises a file event (``_recheck`` need not look at them).
    watched = tuple(state.result.local_imports) if state.result is not None and server.watcher is not None else ()
    fresh = uri in server.fresh  # exportlens.reexport: do not trust the cache
    server.fresh.discard(uri)
    result, from_store = (None, False) if fresh else await runner.lookup(server, pipeline, request)
    from_cache = result is not None
    log.debug("export %s #%d: %s", os.path.basename(state.path), generation, "cache hit" if from_cache else "cache miss")
    if result is None:
        result = await runner.run_on_worker(server, request)
        if result is None:
            return
        server.deferred_stores.submit(pipeline, request, result)  # never raises; the export need not wait
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
    verification.start(server, state, [(request, result)])  # after the diagnostics: they never wait for fixes
    state.index_task = asyncio.ensure_future(indexes.build_index(server, state, text, result))
    open_modules.refresh(server, result)  # the open modules it imports show it too
    pyproject_view.refresh(server, result)  # and its open pyproject.toml, what is located there
    graph_view.refresh(server, uri)  # and its pictures, keeping their view
    overlaid = [p for p, _ in request.overlays]
    server.background(_recheck(server, uri, state, result, overlaid, watched), "checking the files an export read")


def _hold_for_torch(server: Host, state: DocumentState, message: str, text: str, version: int | None) -> None:
    """The environment's torch is outside the supported range (or missing): one
    ``unsupported-torch`` error on line 1 instead of a result no tested torch made, and
    one message box. The next export probes again, so installing a supported torch
    and saving (or ``exportlens.reexport``) is enough."""
    state.enter(Mode.MODEL, "declares targets; the environment's torch is unsupported")
    state.drop_result()
    state.result_lines, state.result_version = split_lines(text), version
    state.notice = Diagnostic(code="unsupported-torch", message=message, line=1)
    diagnostics.publish(server, state)
    server.show_once(f"exportlens: {message}", types.MessageType.Error)


async def _recheck(server: Host, uri: str, state: DocumentState, result: FileResult, overlaid: list[str], watched: tuple[str, ...]) -> None:
    """Export again if a file the export read changed while it ran: the watcher only
    learnt of that file from this result, after the change, so no event will come.
    (Not a module it ran from unsaved text: ``overlaid``; nor one the watcher knew
    before: ``watched``, whose change raises its own event.)"""
    changed = await asyncio.get_running_loop().run_in_executor(server.threads.io, changed_since, result, state.path, overlaid, watched)
    if changed and state.result is result and server.documents.get(uri) is state:
        names = ", ".join(sorted(os.path.basename(p) for p in changed))
        server.log_message(f"exportlens: {os.path.basename(state.path)} depends on files that changed during its export ({names}); exporting it again", types.MessageType.Log)
        server.scheduler.schedule(uri, delay=False)
