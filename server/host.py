"""What a server feature may use of the server: the narrow interface between them.

Features (``features/*``) and the export runner (``exports``) are written against
:class:`Host`, not against ``app.ExportLensServer``: they do not import the app, so
the app imports them at its top without an import cycle, and a feature can be read
(and tested) knowing only the members listed here. ``ExportLensServer`` satisfies
the protocol structurally; the type checker proves it where the app registers each
feature.

The members are the app's state (documents, settings, scheduler, workers, the
pipeline), its message helpers, and the few pygls ``LanguageServer`` members the
features call. Add a member here only when a feature needs it.

This module holds annotations only: it imports no exportlens module at run time
(those imports are for the type checker), so it cannot take part in a cycle.
Command handlers name ``Host`` in their signatures at run time, because pygls
reads their type hints.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol, Sequence, TypeVar

from lsprotocol import types

if TYPE_CHECKING:
    from pygls.progress import Progress
    from pygls.workspace import Workspace

    from exportlens.core.pipeline import Pipeline
    from exportlens.core.watch import Watcher
    from exportlens.server.client import ClientProfile
    from exportlens.server.config import Settings
    from exportlens.server.features.work_done import JobProgress
    from exportlens.server.notebook_cells import NotebookView
    from exportlens.server.scheduler import Scheduler
    from exportlens.server.state import DocumentState
    from exportlens.server.stores import DeferredStores
    from exportlens.server.threads import ServerThreads
    from exportlens.server.trust_gate import TrustGate
    from exportlens.server.workers import ExportBridge

F = TypeVar("F", bound=Callable[..., Any])


class Host(Protocol):
    """The server as its features see it."""

    # ---- state
    documents: dict[str, DocumentState]  # open model documents by URI
    notebooks: dict[str, NotebookView]  # open notebooks by URI (each one's module is a document)
    settings: Settings  # the effective editor settings
    init_section: dict[str, Any]  # the exportlens section of initializationOptions
    user_section: dict[str, Any]  # ... and of the client's pushed or pulled settings
    scheduler: Scheduler
    bridge: ExportBridge
    threads: ServerThreads  # the executors (``io``, ``lookups``, ``stores``, ``verify``): what runs where
    deferred_stores: DeferredStores  # a new result's store, handed to ``threads.stores`` once off the save's path
    fresh: set[str]  # documents whose next export skips the cache
    progress_for: dict[int, JobProgress]  # request id -> its $/progress
    client: ClientProfile  # what the client takes, read once at initialize
    publish_serial: int
    config_ready: asyncio.Event  # set once the client's settings were read
    watcher: Watcher | None  # None until the client is initialised (then files on disk are watched)
    trust: TrustGate  # which folders' code may run

    @property
    def pipeline(self) -> Pipeline: ...

    # ---- messages to the user
    def log_message(self, message: str, kind: types.MessageType = ...) -> None: ...
    def show_once(self, message: str, kind: types.MessageType = ...) -> None: ...
    def notify(self, method: str, params: Any) -> None: ...
    def log_once(self, message: str) -> None: ...
    def shared_caches(self) -> list[dict[str, Any]]: ...

    # ---- work
    def background(self, coro: Awaitable[Any], what: str) -> None: ...
    def reexport_open(self, predicate: Callable[[DocumentState], bool] = ...) -> None: ...
    def watch_dependencies(self) -> None: ...
    def warm(self) -> None: ...
    def start_watching(self) -> None: ...
    async def stop(self) -> None: ...

    # ---- pygls LanguageServer
    @property
    def workspace(self) -> Workspace: ...
    @property
    def work_done_progress(self) -> Progress: ...
    def feature(self, feature_name: str, options: Any | None = None) -> Callable[[F], F]: ...
    def command(self, command_name: str) -> Callable[[F], F]: ...
    async def workspace_configuration_async(self, params: types.ConfigurationParams) -> Sequence[Any | None]: ...
    def workspace_inlay_hint_refresh(self, params: None, callback: Callable[[None], None] | None = None) -> Future[None]: ...
    def workspace_code_lens_refresh(self, params: None, callback: Callable[[None], None] | None = None) -> Future[None]: ...
    def workspace_diagnostic_refresh(self, params: None, callback: Callable[[None], None] | None = None) -> Future[None]: ...
    def text_document_publish_diagnostics(self, params: types.PublishDiagnosticsParams) -> None: ...
    async def window_show_document_async(self, params: types.ShowDocumentParams) -> types.ShowDocumentResult: ...
