"""Lifecycle, text synchronisation and configuration.

- ``initialize``: read the client's capabilities once (``ClientProfile``: push or
  pull diagnostics, progress, markdown or plain text, ...) and
  ``initializationOptions`` (with whether the client trusts its workspace:
  ``exportlens.server.trust_gate``); start warming a worker when a trusted workspace
  folder has a model file (``exportlens.server.warm_at_initialize``).
- ``textDocument/didOpen`` / ``didSave``: export at once; ``didChange``: export the
  buffer after the debounce; ``didClose``: stop and clear its diagnostics.
- ``workspace/didChangeConfiguration``: new settings (pushed in the notification,
  or pulled with ``workspace/configuration``); re-export when it matters.

Every handler catches and logs its own errors: one bad notification must not take
the server down.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from lsprotocol import types
from pygls import uris

from exportlens.core.project import virtual_documents
from exportlens.core.source.tokens import token_key, tokens_of
from exportlens.core.trace import mark
from exportlens.server import config, pyproject_view, verification, warm_at_initialize
from exportlens.server.client import ClientProfile
from exportlens.server.features import diagnostics
from exportlens.server.features.refresh import HINTS, refresh
from exportlens.server.state import DocumentState, Mode

if TYPE_CHECKING:
    from exportlens.server.host import Host

log = logging.getLogger(__name__)

CONFIG_WAIT_S = 2.0  # how long a workspace/configuration request may take
F = TypeVar("F", bound=Callable[..., Any])


def guarded(what: str) -> Callable[[F], F]:
    """Log a handler's exception instead of letting it escape (sync or async handler)."""

    def wrap(fn: F) -> F:
        if inspect.iscoroutinefunction(fn):  # asyncio's is deprecated from Python 3.14

            @functools.wraps(fn)
            async def run_async(ls: Host, *args: Any) -> Any:
                try:
                    return await fn(ls, *args)
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    log.exception("%s failed", what)
                    ls.log_message(f"exportlens: {what} failed: {type(e).__name__}: {e}", types.MessageType.Error)
                    return None

            return run_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def run(ls: Host, *args: Any) -> Any:
            try:
                return fn(ls, *args)
            except Exception as e:
                log.exception("%s failed", what)
                ls.log_message(f"exportlens: {what} failed: {type(e).__name__}: {e}", types.MessageType.Error)
                return None

        return run  # type: ignore[return-value]

    return wrap


def is_python(uri: str, language_id: str | None = None) -> bool:
    path = uris.to_fs_path(uri) or ""
    return uri.startswith("file:") and (language_id == "python" or path.endswith(".py"))


MAX_TOKENIZE = 64 << 10  # bytes: tokenizing on each keystroke stays well under a millisecond per KB


def same_tokens(server: Host, state: DocumentState) -> bool:
    """Whether the buffer now has exactly the tokens (code without comments and blank
    lines) of the text its shown result was made from, so the cache holds that result
    for the buffer (``core/cache`` keeps a tokens manifest for such a file, unless it
    reads its own source). Checked on the event loop, so only for files of moderate size."""
    result = state.result
    if result is None or not state.declares or not server.settings.cache:
        return False
    text = server.workspace.get_text_document(state.uri).source.encode("utf-8", "surrogatepass")
    if len(text) > MAX_TOKENIZE:
        return False
    if state.result_tokens is None or state.result_tokens[0] is not result:
        shown = tokens_of("\n".join(state.result_lines).encode("utf-8", "surrogatepass"))
        state.result_tokens = (result, shown.key if shown is not None and not shown.introspects else None)
    key = state.result_tokens[1]
    return key is not None and token_key(text) == key


def apply_settings(server: Host) -> None:
    """Recompute the settings from their sources; report new problems; act on changes."""
    section = config.merge(server.init_section, server.user_section)
    new, problems = config.parse(section)
    for problem in problems:
        server.show_once(problem, types.MessageType.Warning)
    old, server.settings = server.settings, new
    server.scheduler.debounce_s = new.debounce_ms / 1000
    if new.workers != old.workers or new.start_method != old.start_method:
        server.bridge.jobs = new.workers
        if server.bridge.running or server.bridge.starts:
            # Restart the pool with the new size or start method; what was running is exported again.
            async def restart() -> None:
                await server.bridge.close()
                server.reexport_open(lambda s: s.declares)

            server.background(restart(), "restarting the workers")
    exports_differ = (new.timeout_s, new.memory_mb, new.strict, new.explicit & {"timeout_s", "memory_mb", "strict"}) != (
        old.timeout_s,
        old.memory_mb,
        old.strict,
        old.explicit & {"timeout_s", "memory_mb", "strict"},
    )
    if exports_differ or (new.cache and not old.cache) or new.cache_dir != old.cache_dir:
        server.reexport_open(lambda s: s.declares)
    elif new.diagnostics != old.diagnostics:
        for state in server.documents.values():
            if state.result is not None:
                diagnostics.publish(server, state)
    if new.inlay_hints != old.inlay_hints:
        refresh(server, HINTS)


async def pull_configuration(server: Host) -> None:
    """Ask a client that supports ``workspace/configuration`` for the ``exportlens`` section."""
    if not server.client.configuration:
        return
    try:
        [value] = await asyncio.wait_for(
            server.workspace_configuration_async(types.ConfigurationParams(items=[types.ConfigurationItem(section=config.SECTION)])),
            CONFIG_WAIT_S * 5,
        )
    except Exception as e:  # noqa: BLE001 - a client without settings is fine
        log.info("workspace/configuration failed: %s", e)
        return
    if isinstance(value, dict):
        server.user_section = config.section_of({config.SECTION: value})
        apply_settings(server)


def register(server: Host) -> None:
    @server.feature(types.INITIALIZE)
    @guarded("initialize")
    def initialize(ls: Host, params: types.InitializeParams) -> None:
        ls.client = ClientProfile.read(params.capabilities)
        ls.init_section = config.section_of(params.initialization_options)
        if ls.client.pull_diagnostics:
            diagnostics.register(ls)
        apply_settings(ls)
        folders = warm_at_initialize.workspace_folders(params.root_uri, params.root_path, [f.uri for f in params.workspace_folders or []])
        ls.trust.start(folders, params.initialization_options)  # before anything may run
        ls.warm()

    @server.feature(types.INITIALIZED)
    @guarded("initialized")
    async def initialized(ls: Host, params: types.InitializedParams) -> None:
        ls.start_watching()
        try:
            await pull_configuration(ls)
        finally:
            ls.config_ready.set()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    @guarded("didOpen")
    def did_open(ls: Host, params: types.DidOpenTextDocumentParams) -> None:
        # Synchronous on purpose: notifications are handled in order, so a didClose
        # right after cannot overtake this open.
        doc = params.text_document
        path = uris.to_fs_path(doc.uri) or doc.uri
        # jupyterlab-lsp's text of a notebook runs as the notebook: its folder, its project.
        path = virtual_documents.notebook_path(path) or path
        toml = doc.uri.startswith("file:") and pyproject_view.is_pyproject(path)
        if not is_python(doc.uri, doc.language_id) and not toml:
            return
        state = DocumentState(uri=doc.uri, path=path, version=doc.version, mode=Mode.PYPROJECT if toml else Mode.IDLE)
        ls.documents[doc.uri] = state
        ls.watch_dependencies()
        ls.scheduler.schedule(doc.uri, delay=False)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    @guarded("didChange")
    def did_change(ls: Host, params: types.DidChangeTextDocumentParams) -> None:
        state = ls.documents.get(params.text_document.uri)
        if state is None:
            return
        state.version = params.text_document.version
        verification.cancel(state)  # fixes for the text before this edit: its job must not hold up the next export
        # An edit of comments or blank lines only cannot change the export: the cache
        # serves the shown result with its lines moved, so it need not wait for the
        # typing pause (the lookup takes milliseconds, a debounce hundreds).
        ls.scheduler.schedule(state.uri, delay=not same_tokens(ls, state))

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    @guarded("didSave")
    def did_save(ls: Host, params: types.DidSaveTextDocumentParams) -> None:
        mark("server: didSave read")
        state = ls.documents.get(params.text_document.uri)
        if state is None:
            return
        if ls.scheduler.expedite(state.uri) or ls.scheduler.busy(state.uri):
            return  # the pending export runs now / the running one is for this text
        if state.result_version != state.version or state.result is None:
            ls.scheduler.schedule(state.uri, delay=False)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    @guarded("didClose")
    def did_close(ls: Host, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.scheduler.forget(uri)
        closed = ls.documents.pop(uri, None)
        if closed is not None:
            verification.cancel(closed)
            diagnostics.clear(ls, uri)
            ls.watch_dependencies()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    @guarded("didChangeConfiguration")
    async def did_change_configuration(ls: Host, params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if isinstance(settings, dict) and config.SECTION in settings:
            ls.user_section = config.section_of(settings)
            apply_settings(ls)
        else:
            await pull_configuration(ls)

    @server.feature(types.SHUTDOWN)
    @guarded("shutdown")
    async def shutdown(ls: Host, params: None) -> None:
        await ls.stop()
