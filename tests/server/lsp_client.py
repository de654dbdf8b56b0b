"""A pytest-lsp client that records everything the exportlens server sends, and
helpers to drive documents. Tests wait for recorded notifications, never sleep.

The server runs as ``python -P -m exportlens serve``, the command both editors run,
with each test module's own cache folder so no test reads another's (or the user's)
cache.
"""

from __future__ import annotations

import asyncio
import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable, TypeVar

from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES

from exportlens.server.positions import units

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
WAIT_S = 300.0  # generous: the first export also warms a worker up on a loaded machine
SERVE = ("-P", "-m", "exportlens", "serve")  # what the editors start (-P: no workspace module shadows ours)
T = TypeVar("T")


class RecordingClient(LanguageClient):
    """Keeps every publishDiagnostics (not only the last per URI) and wakes waiters."""

    def __init__(self) -> None:
        super().__init__(converter_factory=default_converter)
        self.published: list[types.PublishDiagnosticsParams] = []
        self.verified: list[tuple[str, int | None, int]] = []  # exportlens/fixesVerified: (uri, version, fixes)
        self.changed = asyncio.Event()
        self.encoding = "utf-16"

    async def until(self, predicate: Callable[[], T | None], what: str, timeout: float = WAIT_S) -> T:
        """Wait until ``predicate()`` returns something truthy (re-checked on every message)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            found = predicate()
            if found:
                return found
            self.changed.clear()
            remaining = end - loop.time()
            if remaining <= 0:
                published = [(p.uri.rsplit("/", 1)[-1], p.version, [d.code for d in p.diagnostics]) for p in self.published]
                logs = [m.message for m in self.log_messages]
                raise AssertionError(f"timed out waiting for {what}; published: {published}; log: {logs}")
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    def publishes(self, uri: str) -> list[types.PublishDiagnosticsParams]:
        return [p for p in self.published if p.uri == uri]

    async def diagnostics_for(self, uri: str, version: int, timeout: float = WAIT_S) -> list[types.Diagnostic]:
        found = await self.until(lambda: next((p for p in reversed(self.publishes(uri)) if p.version == version), None), f"diagnostics of {uri} v{version}", timeout)
        return list(found.diagnostics)

    async def fixes_verified(self, uri: str, version: int, timeout: float = WAIT_S) -> int:
        """How many fixes the server verified for the result of ``uri`` at ``version``,
        once it says so (``exportlens/fixesVerified``): code actions offer them then."""
        found = await self.until(lambda: next((v for v in reversed(self.verified) if v[0] == uri and v[1] == version), None), f"fixes verified for {uri} v{version}", timeout)
        return found[2]

    async def command(self, name: str, *args: Any) -> Any:
        return await self.workspace_execute_command_async(types.ExecuteCommandParams(command=name, arguments=list(args)))


def make_client(asked: list[str] | None = None) -> RecordingClient:
    """A client that wakes its waiters on every message the server sends it; ``asked``,
    when given, notes the method of every request and notification but diagnostics."""
    client = RecordingClient()

    def waking(method: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        def run(ls: RecordingClient, params: Any) -> Any:
            if asked is not None:
                asked.append(method)
            try:
                return handler(ls, params)
            finally:
                ls.changed.set()

        return run

    for method, handler in DEFAULT_CLIENT_FEATURES.items():
        if method != types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS:
            client.feature(method)(waking(method, handler))

    # The refresh requests a client answers with nothing (the editor asks for hints or
    # lenses again); pytest-lsp has no handler for them.
    for method in (types.WORKSPACE_INLAY_HINT_REFRESH, types.WORKSPACE_CODE_LENS_REFRESH):
        client.feature(method)(waking(method, lambda ls, params: None))

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_publish(ls: RecordingClient, params: types.PublishDiagnosticsParams) -> None:
        ls.published.append(params)
        ls.diagnostics[params.uri] = params.diagnostics
        ls.changed.set()

    @client.feature("exportlens/fixesVerified")
    def on_verified(ls: RecordingClient, params: Any) -> None:
        ls.verified.append((getattr(params, "uri", ""), getattr(params, "version", None), getattr(params, "fixes", 0)))
        ls.changed.set()

    return client


def capabilities(profile: str) -> types.ClientCapabilities:
    """A pytest-lsp client profile; ``vscode-pull`` is VS Code as it is today (pull +
    refresh); ``+notebooks`` after a profile adds notebook document sync, as VS Code's
    client has it."""
    if profile.endswith("+notebooks"):
        caps = capabilities(profile.removesuffix("+notebooks"))
        sync = types.NotebookDocumentSyncClientCapabilities(dynamic_registration=True, execution_summary_support=True)
        caps.notebook_document = types.NotebookDocumentClientCapabilities(synchronization=sync)
        return caps
    if profile == "vscode-pull":
        caps = client_capabilities("visual-studio-code")
        assert caps.text_document is not None and caps.workspace is not None
        caps.text_document.diagnostic = types.DiagnosticClientCapabilities(dynamic_registration=False, related_document_support=False)
        caps.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
        return caps
    return client_capabilities(profile)


@asynccontextmanager
async def running_server(
    profile: str,
    workspace: Path,
    options: dict[str, Any] | None = None,
    *,
    serve: tuple[str, ...] = SERVE,
    cwd: Path | None = None,
    asked: list[str] | None = None,
    env: dict[str, str] | None = None,
    trusted: bool | None = True,
) -> AsyncIterator[tuple[RecordingClient, types.InitializeResult]]:
    """The server started as ``python *serve`` in ``cwd`` (the test's own by default);
    ``asked`` notes what the server asks of the client (see ``make_client``); ``env``
    adds to its environment. ``trusted`` goes in ``initializationOptions`` as VS Code's
    extension sends its Workspace Trust (None: not sent, as a plain client does; the
    server then asks the trust record, which ``tests/conftest.py`` writes for the
    session's folders -- the benchmarks have none, so they rely on this)."""
    client = make_client(asked)
    full_env = dict(os.environ, PYTHONWARNINGS="ignore", **(env or {}))
    await client.start_io(sys.executable, *serve, env=full_env, cwd=cwd)
    try:
        result = await client.initialize_session(
            types.InitializeParams(
                capabilities=capabilities(profile),
                root_uri=workspace.as_uri(),
                workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
                initialization_options={"exportlens": options or {}, **({} if trusted is None else {"trusted": trusted})},
            )
        )
        client.encoding = str(result.capabilities.position_encoding or "utf-16")
        yield client, result
    finally:
        await client.shutdown_session()
        await client.stop()


class Doc:
    """One open document: keeps its text and version in step with the server."""

    def __init__(self, client: RecordingClient, path: Path) -> None:
        self.client = client
        self.path = path
        self.uri = path.as_uri()
        self.text = path.read_text()
        self.version = 0

    def open(self) -> int:
        self.version = 1
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=self.uri, language_id="python", version=self.version, text=self.text)))
        return self.version

    def position(self, line: int, index: int) -> types.Position:
        """Line and Python str index as an LSP position in the negotiated encoding."""
        return types.Position(line, units(self.text.split("\n")[line][:index], self.client.encoding))

    def replace(self, old: str, new: str) -> int:
        """An incremental edit: replace the first ``old`` with ``new``; the new version."""
        at = self.text.index(old)
        before = self.text[:at]
        line = before.count("\n")
        col = len(before) - (before.rfind("\n") + 1)
        end_text = before + old
        end_line = end_text.count("\n")
        end_col = len(end_text) - (end_text.rfind("\n") + 1)
        start = self.position(line, col)
        end = self.position(end_line, end_col)
        self.text = self.text[:at] + new + self.text[at + len(old) :]
        self.version += 1
        change = types.TextDocumentContentChangePartial(range=types.Range(start, end), text=new)
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(types.VersionedTextDocumentIdentifier(version=self.version, uri=self.uri), [change]))
        return self.version

    def save(self) -> None:
        self.path.write_text(self.text)
        self.client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(self.uri)))

    def close(self) -> None:
        self.client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(self.uri)))

    def line_of(self, text: str) -> int:
        """0-based line of the first occurrence of ``text``."""
        return self.text[: self.text.index(text)].count("\n")


def codes(diagnostics: list[types.Diagnostic]) -> list[tuple[str, int]]:
    return sorted((str(d.code), d.range.start.line) for d in diagnostics)


def children(pid: int) -> set[int]:
    """The live child processes of ``pid`` (each thread's children list): whether the
    server started a worker."""
    found: set[int] = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            found.update(int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split())
        except OSError:
            continue  # the thread ended meanwhile
    return found
