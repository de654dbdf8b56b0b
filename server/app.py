"""``exportlens serve``: the LanguageServer that holds the state, and ``main``.

State lives on one ``LanguageServer`` subclass (the pygls examples' shape); each
LSP feature registers its handlers from its own module. The server never imports
torch: exports run in warm worker processes behind ``workers.ExportBridge``, and
their requests, cache lookups and stores go through ``exportlens.core.pipeline``,
the path the CLI takes too.

Robustness rules: a handler's exception is logged (``window/logMessage``) and never
stops the server; a message box (``window/showMessage``) is shown at most once per
distinct problem; nothing but the LSP stream is ever written to stdout.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Any, Awaitable, Callable

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from exportlens.core import torchversion
from exportlens.core.isolation.pool import PoolEvent
from exportlens.core.pipeline import CacheFolders, Pipeline
from exportlens.core.project.settings import find_pyproject
from exportlens.core.watch import Watcher, dependency_folders, self_caused, stale_by
from exportlens.server import auth, exports, framing, listener, open_modules, pyproject_view, warm_at_initialize
from exportlens.server.client import ClientProfile
from exportlens.server.config import Settings, overrides
from exportlens.server.endpoints import Endpoint, EndpointError, open_endpoint
from exportlens.server.features import actions, commands, documents, graph_view, hints, hover, lenses, notebook_sync
from exportlens.server.features.work_done import JobProgress
from exportlens.server.notebook_cells import NotebookView
from exportlens.server.protocol import ExportLensProtocol
from exportlens.server.scheduler import Scheduler
from exportlens.server.state import DocumentState
from exportlens.server.stores import DeferredStores
from exportlens.server.threads import ServerThreads
from exportlens.server.trust_gate import TrustGate
from exportlens.server.workers import BridgeState, ExportBridge

log = logging.getLogger("exportlens.server")

VERSION = "0.1.0"


class ExportLensServer(LanguageServer):
    def __init__(self) -> None:
        # ExportLensProtocol: a request whose params pygls cannot read still gets an answer.
        super().__init__(
            "exportlens",
            VERSION,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=notebook_sync.SYNC,
            protocol_cls=ExportLensProtocol,
        )
        self.settings = Settings()
        self.init_section: dict[str, Any] = {}
        self.user_section: dict[str, Any] = {}
        self.documents: dict[str, DocumentState] = {}
        self.notebooks: dict[str, NotebookView] = {}  # open notebooks by URI (their module is in ``documents``)
        self.bridge = ExportBridge(jobs=1, on_event=self._on_pool_event, on_state=self._on_bridge_state)
        self.scheduler = Scheduler(self._export, debounce_s=0.3, on_error=self._export_failed)
        self.progress_for: dict[int, JobProgress] = {}
        self.fresh: set[str] = set()  # documents whose next export skips the cache
        self.client = ClientProfile()  # read from the capabilities at initialize
        self.publish_serial = 0
        self.config_ready = asyncio.Event()
        # Every thread and executor of the server: what runs where, and why (``threads``).
        self.threads = ServerThreads()
        # A new result goes to the stores' thread a moment later, off the save's path.
        self.deferred_stores = DeferredStores(self.threads.stores)
        self.watcher: Watcher | None = None
        # At the exit, in this order, before the executors stop: every store handed to
        # the stores' thread (it finishes them), the workers and their thread, watching.
        self.threads.at_shutdown("the waiting stores", self.deferred_stores.flush)
        self.threads.at_shutdown("the workers", self.bridge.close_now)
        self.threads.at_shutdown("watching files", self._stop_watching)
        self.trust = TrustGate(warn=self.log_once)  # no code of a folder runs until it is trusted
        self._pipeline: Pipeline | None = None
        # Kept across settings changes: one cache per folder, one shared cache per URL,
        # whose trouble goes to the log (and the status), not to a message box.
        self._cache_folders = CacheFolders(warn=self._log_any_thread)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._said: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    # ---- messages to the user

    def log_message(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        log.log(logging.WARNING if kind <= types.MessageType.Warning else logging.INFO, "%s", message)
        try:
            self.window_log_message(types.LogMessageParams(type=kind, message=message))
        except Exception:  # noqa: BLE001 - the client may be gone
            pass

    def notify(self, method: str, params: Any) -> None:
        """A notification of exportlens's own (``exportlens/...``); a gone client is no error."""
        try:
            self.protocol.notify(method, params)
        except Exception:  # noqa: BLE001 - the client may be gone
            pass

    def show_once(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """A message box, at most once per distinct text for the server's lifetime."""
        self.log_message(message, kind)
        if message in self._said:
            return
        self._said.add(message)
        try:
            self.window_show_message(types.ShowMessageParams(type=kind, message=message))
        except Exception:  # noqa: BLE001
            pass

    def log_once(self, message: str) -> None:
        if message not in self._said:
            self._said.add(message)
            self.log_message(message, types.MessageType.Warning)

    def report_server_error(self, error: Exception, source: Any) -> None:
        # pygls would show a message box per error; a log line (and one box per kind) is enough.
        self.log_message(f"exportlens server error ({type(error).__name__}): {error}", types.MessageType.Error)

    # ---- background work

    def background(self, coro: Awaitable[Any], what: str) -> None:
        """Run ``coro`` as a task whose failure is logged, not lost."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("%s failed", what, exc_info=t.exception())
                self.log_message(f"{what} failed: {t.exception()}", types.MessageType.Error)

        task.add_done_callback(done)

    # ---- exports

    async def _export(self, uri: str, generation: int) -> None:
        await exports.export_document(self, uri, generation)

    def _export_failed(self, uri: str, error: BaseException) -> None:
        state = self.documents.get(uri)
        if state is not None:
            state.failure = f"{type(error).__name__}: {error}"
        self.show_once(f"exportlens could not export {os.path.basename(uri)}: {type(error).__name__}: {error} (see the output log)", types.MessageType.Error)

    def warm(self) -> None:
        """Warm a worker when a trusted workspace folder has a model file (``warm_at_initialize``)."""
        folders = [f for f in self.trust.folders if self.trust.allows(f)]
        unsupported = torchversion.problem()  # a worker would import a torch no result may come from
        if unsupported is not None:
            self.log_message(f"exportlens: no worker is warmed: {unsupported}", types.MessageType.Warning)
        elif folders:
            self.background(warm_at_initialize.warm_if_models(self, folders), "warming a worker")
        else:
            self.log_message("exportlens: no trusted workspace folder; no worker is warmed", types.MessageType.Log)

    def reexport_open(self, predicate: Callable[[DocumentState], bool] = lambda s: True) -> None:
        for uri, state in list(self.documents.items()):
            if predicate(state):
                self.scheduler.schedule(uri, delay=False)

    # ---- the pipeline: requests, cache choice, lookup and store

    @property
    def pipeline(self) -> Pipeline:
        """The pipeline for the current editor settings; a new one when they change
        what it reads (the caches it opened are kept)."""
        if self._loop is None:
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:
                pass  # not on the event loop yet: warnings are shown directly
        wanted = overrides(self.settings)
        if self._pipeline is None or self._pipeline.overrides != wanted:
            self._pipeline = Pipeline(wanted, warn=self._warn_any_thread, caches=self._cache_folders)
        return self._pipeline

    def shared_caches(self) -> list[dict[str, Any]]:
        """Each shared cache in use: its URL, whether it is used now and why not."""
        return [remote.status() for remote in self._cache_folders.remotes()]

    def _log_any_thread(self, message: str) -> None:
        """``log_once`` from any thread (the io thread reads the shared cache)."""
        message = f"exportlens: {message}"
        loop = self._loop
        if loop is None:
            self.log_once(message)
            return
        try:
            loop.call_soon_threadsafe(self.log_once, message)
        except RuntimeError:
            log.warning("%s", message)  # the loop is closed: the server is exiting

    def _warn_any_thread(self, message: str) -> None:
        """``show_once`` for the pipeline, which warns from the io thread too: pygls
        is not thread-safe, so the message goes through the event loop."""
        message = f"exportlens: {message}"  # a message box names who speaks; the CLI's log lines do too
        loop = self._loop
        try:
            on_loop = loop is None or asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self.show_once(message)
        elif loop is not None:
            try:
                loop.call_soon_threadsafe(self.show_once, message)
            except RuntimeError:
                log.warning("%s", message)  # the loop is closed: the server is exiting

    # ---- workers

    def _on_pool_event(self, event: PoolEvent) -> None:
        if event.kind == "begin" and event.request_id is not None:
            progress = self.progress_for.get(event.request_id)
            if progress is not None:
                count = f" ({event.index}/{event.total})" if event.index and event.total else ""
                percent = int(100 * (event.index - 1) / event.total) if event.index and event.total else None
                what = f"{event.phase}: {event.target}" if event.phase and event.target else event.phase or f"exporting {event.target}"
                progress.report(f"{what}{count}", percent)
        elif event.kind == "restart":
            self.log_message(f"exportlens: a worker process failed ({event.detail}); starting a new one", types.MessageType.Warning)
        elif event.kind == "retired":
            self.log_message(f"exportlens: a worker process retired ({event.detail}); starting a new one")
            # A library changed on disk: the open results made with it miss the cache now
            # (its state is in their key) and are exported again; the others are hits.
            self.reexport_open(lambda s: s.declares and s.result is not None and bool(s.result.libraries))
        elif event.kind == "preloaded":
            self.log_message(f"exportlens: worker preloaded libraries ({event.detail})", types.MessageType.Log)
        elif event.kind == "gave-up":
            self.show_once(f"exportlens: worker processes fail to start ({event.detail}); is torch installed in {sys.executable}?", types.MessageType.Error)
        elif event.kind == "ready":
            self.log_message(f"exportlens: worker ready ({event.detail})")

    def _on_bridge_state(self, old: BridgeState, new: BridgeState) -> None:
        how = f" (jobs start by {self.bridge.start_method})" if new is BridgeState.STARTING and self.bridge.start_method else ""
        self.log_message(f"exportlens: workers {old.value} -> {new.value}{how}", types.MessageType.Log)

    # ---- file watching

    def files_changed(self, paths: set[str]) -> None:
        """Files changed on disk: re-export the open models that depend on them (a
        module that failed or was missing is a dependency too), unless the change is
        what an export itself wrote."""
        log.debug("files changed: %s", sorted(paths))
        paths = paths - self_caused(paths, [s.result for s in self.documents.values() if s.result is not None])
        for uri, state in list(self.documents.items()):
            if not state.declares:
                continue
            stale = stale_by(state.result, state.path, find_pyproject(state.path), paths)
            if stale:
                changed = ", ".join(sorted(os.path.basename(p) for p in stale))
                self.log_message(f"exportlens: {os.path.basename(state.path)} depends on changed files ({changed}); exporting it again", types.MessageType.Log)
                self.scheduler.schedule(uri, delay=False)
        open_modules.stale_views(self, paths)  # open model modules: their view's inputs
        pyproject_view.stale(self, paths)  # an open pyproject.toml: itself and the files it names

    def watch_dependencies(self) -> None:
        if self.watcher is None:
            return
        directories: set[str] = set()
        files: set[str] = set()
        for state in self.documents.values():
            directories.add(os.path.dirname(state.path))
            if state.result is not None:
                directories |= dependency_folders(state.result)
                files.update(state.result.local_imports)
            pyproject = find_pyproject(state.path)
            if pyproject:
                directories.add(os.path.dirname(pyproject))
        try:
            self.watcher.watch(directories, files)
        except Exception as e:  # noqa: BLE001 - no watching is degraded, not broken
            self.log_once(f"exportlens: watching files failed ({type(e).__name__}: {e})")

    def start_watching(self) -> None:
        if self.watcher is None:
            self.watcher = Watcher(asyncio.get_running_loop(), self.files_changed, lambda m: self.show_once(m, types.MessageType.Warning))

    def _stop_watching(self) -> None:
        if self.watcher is not None:
            self.watcher.close()

    async def stop(self) -> None:
        self.scheduler.cancel_all()
        self.deferred_stores.flush()  # the stores' thread finishes them before the process exits
        if self.watcher is not None:
            self.watcher.close()
        await self.bridge.close()


def create_server() -> ExportLensServer:
    server = ExportLensServer()
    documents.register(server)
    hover.register(server)
    hints.register(server)
    lenses.register(server)
    commands.register(server)
    actions.register(server)
    graph_view.register(server)
    notebook_sync.register(server)
    notebook_sync.map_requests(server, server.protocol.fm.features)
    return server


def quiet_invalid_params(record: logging.LogRecord) -> bool:
    """pygls logs every error a request returns with a traceback. A bad argument to a
    command (an unknown target name) is the client's mistake, already answered with
    an error response: one line at warning level, no traceback, in the editor's log."""
    if record.exc_info and isinstance(record.exc_info[1], JsonRpcInvalidParams):
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.msg, record.args = "%s", (f"request refused: {record.exc_info[1]}",)
        record.exc_info, record.exc_text = None, None
    return True


def main(tcp: str | None = None, *, socket_path: str | None = None, token_file: str | None = None, allow_remote: bool = False) -> int:
    """Run the server on stdio, on ``HOST:PORT`` with ``tcp`` (a token required), or on
    the Unix socket ``socket_path``; the exit code."""
    logging.basicConfig(stream=sys.stderr, level=os.environ.get("EXPORTLENS_LOG_LEVEL", "WARNING").upper(), format="exportlens %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(quiet_invalid_params)
    endpoint: Endpoint | None = None
    if tcp is not None or socket_path is not None or token_file is not None or allow_remote:
        try:
            # Before the server exists: nothing listens until every check passed,
            # and no thread runs while the socket file is made (the umask).
            endpoint = open_endpoint(tcp=tcp, socket_path=socket_path, token_file=token_file, allow_remote=allow_remote, environ=os.environ)
        except EndpointError as e:
            print(f"exportlens serve: {e}", file=sys.stderr)
            return 2
    os.environ.pop(auth.ENV, None)  # the workers, which run model code, need not see it
    server = create_server()
    try:
        if endpoint is not None:
            endpoint.announce()
            listener.run(server, endpoint)
        else:
            stdout = sys.stdout.buffer
            sys.stdout = sys.stderr  # a stray print must never corrupt the LSP stream
            framing.run_stdio(server, sys.stdin.buffer, stdout)  # pygls' start_io, surviving bad frames
    finally:
        # Also when the client left without a shutdown: the waiting stores are still
        # written, the workers stopped (``threads``).
        server.threads.shutdown()
        if endpoint is not None:
            endpoint.close()
    return 0
