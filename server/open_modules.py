"""An open model module (``pkg/model.py``, declaring no target) shows what the
targets that exercise it found there.

A real project keeps its model classes in their own modules and declares targets
elsewhere; the file being edited is the module. Its result is the view
(``exportlens.core.model.views.view_for``) of the project's model files whose run
imported it: the diagnostics at its lines (related information names the target)
and the specs whose lines are there, for hovers. Each model file's result comes from
what is already open (the declaring file's last published result), else the cache
(the pipeline's lookup), else an export on the server's worker bridge, stored like
any other; a fresh cache never starts a worker. Only the model files whose text can
reach the module through the project's imports are asked (``core.project.importers``):
opening a script that no model imports exports nothing.

Every export carries the unsaved text of the project's open modules (``overlays``),
so the view is made from the module's *buffer*, saved or not: typing in
``blocks.py`` moves its diagnostics after the typing pause, as in a declaring file.
An open declaring file whose last result was made from another text of the module
is exported again first (``_stale_open_results``), and its new result makes the view
again (``refresh``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING

from lsprotocol import types

from exportlens.core.model.results import FileResult
from exportlens.core.model.views import view_for
from exportlens.core.project.importers import model_files_importing
from exportlens.server import indexes, overlays, runner, verification
from exportlens.server.features import diagnostics
from exportlens.server.positions import split_lines
from exportlens.server.state import Mode

if TYPE_CHECKING:
    from exportlens.server.host import Host
    from exportlens.server.state import DocumentState

log = logging.getLogger(__name__)

async def result_of(server: Host, file: str, fresh: bool = False) -> tuple[FileResult | None, bool]:
    """``file``'s result: the open document's, the cache's, else a fresh export;
    whether it took an export. ``fresh`` (``exportlens.reexport`` on the module): not
    the cache's, and an open declaring file is exported again too."""
    real = os.path.realpath(file)
    for other in server.documents.values():
        if other.declares and os.path.realpath(other.path) == real:
            # Open: its own export is (or will be) published, and refreshes the view then.
            if fresh:
                server.fresh.add(other.uri)
                server.scheduler.schedule(other.uri, delay=False)
            return other.result, False
    if not server.trust.allows(file):
        return None, False  # a model file of an untrusted folder is neither run nor looked up
    pipeline = server.pipeline
    request = pipeline.request(file, id=server.bridge.next_id(), overlays=await overlays.for_export(server, file))
    found = None if fresh else (await runner.lookup(server, pipeline, request))[0]
    if found is not None:
        return found, False
    server.log_message(f"exportlens: {os.path.basename(file)} is not in the cache; exporting it to show what it does to an open module", types.MessageType.Log)
    found = await runner.run_on_worker(server, request)
    if found is not None:
        server.deferred_stores.submit(pipeline, request, found)
    return found, True


async def show_module(server: Host, state: DocumentState, generation: int) -> None:
    """Publish the view of the targets that exercise the module ``state``."""
    loop = asyncio.get_running_loop()
    files = await loop.run_in_executor(server.threads.io, model_files_importing, state.path)
    fresh = state.uri in server.fresh
    server.fresh.discard(state.uri)
    # The buffer, saved or not: the exports import the module from its unsaved text
    # (``overlays``), so the view is of the text as it is being typed.
    document = server.workspace.get_text_document(state.uri)
    text, version = document.source, document.version
    got = [await result_of(server, f, fresh) for f in files]
    results = [r for r, _ in got if r is not None]
    exported = any(e for _, e in got)
    now = await loop.run_in_executor(server.threads.io, overlays.state_of, server, state, text)
    if _stale_open_results(server, state.path, now, files):
        return  # their exports run now, and make this view again (``refresh``) when done
    if not server.scheduler.is_latest(state.uri, generation) or server.documents.get(state.uri) is not state:
        return  # a newer run (or a close) came in
    had = state.result is not None
    view: FileResult | None = view_for(state.path, results)
    if view is not None and not view.targets and not view.diagnostics:
        view = None  # no target runs this file: nothing to show, as for any other file
    # Only a view that shows something makes this a model module: a plain file whose
    # run found nothing is idle, also while a later run (a save, a change on disk) looks again.
    state.enter(Mode.VIEW if view is not None else Mode.IDLE, "targets that import it ran it" if view is not None else "no target runs it")
    state.drop_result()
    state.result, state.from_cache = view, not exported
    if view is None:
        if had:
            state.result_lines = split_lines(text)
            diagnostics.publish(server, state)
        return
    state.result_lines = split_lines(text)
    state.result_version = version  # the results were made from this text (``_stale_open_results``)
    diagnostics.publish(server, state)
    server.watch_dependencies()
    state.index_task = asyncio.ensure_future(indexes.build_index(server, state, text, view))
    # Its fixes are verified in the model files that run it, at this module's lines only.
    made = [(server.pipeline.request(f, id=server.bridge.next_id(), overlays=await overlays.for_export(server, f)), r) for f, (r, _) in zip(files, got, strict=True) if r is not None]
    if server.scheduler.is_latest(state.uri, generation) and state.result is view:
        verification.start(server, state, made, only=os.path.realpath(state.path))


def _stale_open_results(server: Host, module: str, now: str | None, files: list[str]) -> bool:
    """Whether an open declaring file's last result was made from another text of
    ``module`` than the one it has now (``now``: its buffer's state, saved or not): a
    view made from it would show what the module no longer does -- lines the typing
    moved, a diagnostic a quick fix removed. Those files are exported again (with the
    buffer's text); True when there were any."""
    real, wanted = os.path.realpath(module), {os.path.realpath(f) for f in files}
    stale = False
    for other in list(server.documents.values()):
        result = other.result
        if not other.declares or result is None or os.path.realpath(other.path) not in wanted:
            continue
        recorded = dict(zip(map(os.path.realpath, result.local_imports), result.local_import_hashes, strict=False))
        if now is not None and recorded.get(real) not in (None, "", now):
            server.scheduler.schedule(other.uri, delay=False)
            stale = True
    return stale


def refresh(server: Host, result: FileResult) -> None:
    """A declaring file's result changed: make the view of every open module it
    imports again (from the results now open or cached)."""
    imported = {os.path.realpath(p) for p in result.local_imports}
    for uri, other in list(server.documents.items()):
        if not other.declares and os.path.realpath(other.path) in imported:
            server.scheduler.schedule(uri, delay=False)


def stale_views(server: Host, paths: set[str]) -> None:
    """Files changed on disk: a module's view depends on the module itself (its
    saved bytes are what the exports read) and on everything its view's runs read."""
    for uri, state in list(server.documents.items()):
        if state.declares or not state.view:
            continue
        deps = {os.path.realpath(state.path)} | ({os.path.realpath(p) for p in state.result.local_imports} if state.result else set())
        if deps & paths:
            server.scheduler.schedule(uri, delay=False)
