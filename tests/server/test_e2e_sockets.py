"""``exportlens serve --tcp`` and ``--socket`` through real sockets, as an attacker and
as an editor drive them.

The server is the real command (``python -P -m exportlens serve --tcp 127.0.0.1:0``:
it prints the port it bound). Hostile clients are raw sockets speaking LSP framing,
sending everything at once (``initialize``, ``initialized``, ``didOpen`` of a model
whose import writes a marker file, a command): none of it may run. The editor is a
pytest-lsp client connected to the same port. The marker model is opened at the end
by the authenticated client, so the test also shows that the marker would have been
written had anything of the hostile connections been acted on.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from lsprotocol import types
from pygls.io_ import run_async

from exportlens.server.framing import MORE, LspFrameDecoder
from tests.server.listening import ServerProcess
from tests.server.lsp_client import EXAMPLES, SERVE, WAIT_S, Doc, RecordingClient, capabilities, make_client

pytestmark = pytest.mark.adversarial

TOKEN = "e2e-token-0123456789abcdef"
ANSWER_S = 60.0  # generous: a loaded 2-core machine; an answer normally takes milliseconds

MARKER_MODEL = """import os
import pathlib

pathlib.Path({marker!r}).write_text("imported by an export; token: " + os.environ.get("EXPORTLENS_TOKEN", "none"))

import torch


class Twice(torch.nn.Module):
    def forward(self, x):
        return x * 2


model = Twice()
example_args = (torch.randn(2),)
"""


def frame(message: Any) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def initialize(root: Path, options: dict[str, Any] | None, msg_id: Any = 0) -> dict[str, Any]:
    params: dict[str, Any] = {"processId": None, "rootUri": root.as_uri(), "workspaceFolders": [{"uri": root.as_uri(), "name": "ws"}], "capabilities": {}}
    if options is not None:
        params["initializationOptions"] = options
    return {"jsonrpc": "2.0", "id": msg_id, "method": "initialize", "params": params}


def did_open(path: Path) -> dict[str, Any]:
    item = {"uri": path.as_uri(), "languageId": "python", "version": 1, "text": path.read_text()}
    return {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}}


class Raw:
    """A raw client connection: bytes out, decoded messages in, and whether it was closed."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.settimeout(ANSWER_S)
        self.decoder = LspFrameDecoder(lambda m: None)

    @classmethod
    def tcp(cls, host: str, port: int) -> Raw:
        return cls(socket.create_connection((host, port), timeout=ANSWER_S))

    def send(self, *parts: bytes | dict[str, Any]) -> None:
        self.sock.sendall(b"".join(p if isinstance(p, bytes) else frame(p) for p in parts))

    def until_closed(self) -> list[Any]:
        """Every message the server sent until it closed the connection."""
        messages: list[Any] = []
        while True:
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                data = b""
            while (found := self.decoder.next_message()) is not MORE:
                messages.append(found)
            if not data:
                self.sock.close()
                return messages
            self.decoder.feed(data)

    def response(self, msg_id: Any) -> dict[str, Any]:
        while True:
            while (found := self.decoder.next_message()) is not MORE:
                if isinstance(found, dict) and found.get("id") == msg_id and "method" not in found:
                    return found
            data = self.sock.recv(65536)
            assert data, f"the server closed the connection before answering {msg_id!r}"
            self.decoder.feed(data)

    def close(self) -> None:
        self.sock.close()


async def start_unix(client: RecordingClient, path: str) -> None:
    """pygls' ``start_tcp`` for a Unix socket (pygls has none)."""
    reader, writer = await asyncio.open_unix_connection(path)
    client.protocol.set_writer(writer)  # type: ignore[arg-type]
    task = asyncio.create_task(run_async(stop_event=client._stop_event, reader=reader, protocol=client.protocol, error_handler=client.report_server_error))
    client._async_tasks.append(task)


@asynccontextmanager
async def editor(workspace: Path, options: dict[str, Any], *, tcp: tuple[str, int] | None = None, unix: str | None = None) -> AsyncIterator[RecordingClient]:
    """A pytest-lsp client in session with the server at ``tcp`` or ``unix``."""
    client = make_client()
    if tcp is not None:
        await client.start_tcp(*tcp)
    else:
        assert unix is not None
        await start_unix(client, unix)
    try:
        await asyncio.wait_for(
            client.initialize_session(
                types.InitializeParams(
                    capabilities=capabilities("visual-studio-code"),
                    root_uri=workspace.as_uri(),
                    workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
                    initialization_options={"exportlens": options},
                )
            ),
            ANSWER_S,
        )
        yield client
    finally:
        await client.shutdown_session()
        await client.stop()


def modes(folder: Path) -> dict[str, int]:
    """Permission bits of ``folder`` and everything under it, by relative path."""
    found = {".": stat.S_IMODE(folder.stat().st_mode)}
    for path in folder.rglob("*"):
        found[str(path.relative_to(folder))] = stat.S_IMODE(path.lstat().st_mode)
    return found


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(the workspace, its marker model, the marker file it would write)."""
    root = tmp_path / "ws"
    root.mkdir()
    marker = tmp_path / "MARKER"
    model = root / "marker_model.py"
    model.write_text(MARKER_MODEL.format(marker=str(marker)))
    shutil.copy(EXAMPLES / "counter.py", root / "counter.py")
    return root, model, marker


@pytest.mark.asyncio
async def test_only_the_right_token_runs_anything_and_then_everything_works(workspace: tuple[Path, Path, Path], tmp_path: Path) -> None:
    root, marker_model, marker = workspace
    trace = tmp_path / "trace"
    cache = tmp_path / "made-by-the-server" / "cache"
    server = ServerProcess("--tcp", "127.0.0.1:0", cwd=root, env={"EXPORTLENS_TOKEN": TOKEN, "EXPORTLENS_TRACE": str(trace), "EXPORTLENS_CACHE_DIR": str(cache)})
    try:
        host, port = await asyncio.to_thread(server.address)
        assert TOKEN not in server.stderr  # a token from the environment is not echoed

        # Everything a client would send, in one write, behind a first message that is not admitted.
        rest = [
            {"jsonrpc": "2.0", "method": "initialized", "params": {}},
            did_open(marker_model),
            {"jsonrpc": "2.0", "id": 7, "method": "workspace/executeCommand", "params": {"command": "exportlens.reexport", "arguments": [marker_model.as_uri()]}},
        ]
        attempts: list[tuple[str, list[bytes | dict[str, Any]], int | None]] = [
            ("no token", [initialize(root, {"exportlens": {"debounceMs": 0}})], -32803),
            ("no options", [initialize(root, None)], -32803),
            ("wrong token", [initialize(root, {"exportlens": {"token": TOKEN[:-1] + "X"}})], -32803),
            ("token as a setting of another tool", [initialize(root, {"other": {"token": TOKEN}})], -32803),
            ("didOpen first", [], None),
            ("a request first", [{"jsonrpc": "2.0", "id": 3, "method": "exportlens.status", "params": {}}], -32002),
            ("garbage, then a wrong token", [b"\x00\xffnot a header\r\n\r\nContent-Length: banana\r\n\r\n", initialize(root, {"exportlens": {"token": "guess"}})], -32803),
        ]
        for case, first, code in attempts:
            raw = await asyncio.to_thread(Raw.tcp, host, port)
            await asyncio.to_thread(raw.send, *first, *rest)
            answers = await asyncio.to_thread(raw.until_closed)  # returns only once the server closed it
            if code is None:
                assert answers == [], (case, answers)
            else:
                [answer] = answers  # the error, and nothing for the command or the notifications
                assert answer["error"]["code"] == code, (case, answer)
                assert "exportlens" in answer["error"]["message"] and TOKEN not in json.dumps(answer), (case, answer)
        assert server.proc.poll() is None, server.stderr
        assert await asyncio.to_thread(server.count, r"refused the connection from 127\.0\.0\.1:\d+", len(attempts)) == len(attempts), server.stderr
        assert "initialize with a wrong token" in server.stderr and "initialize without a token" in server.stderr

        # A client that connects and goes away at once, and one that sends only garbage.
        silent = await asyncio.to_thread(Raw.tcp, host, port)
        silent.close()
        junk = await asyncio.to_thread(Raw.tcp, host, port)
        await asyncio.to_thread(junk.send, b"Content-Length: 99999999999\r\n\r\n" + os.urandom(4096))
        junk.close()

        # The editor, with the token: the server works end to end.
        async with editor(root, {"token": TOKEN, "debounceMs": 0}, tcp=(host, port)) as client:
            doc = Doc(client, root / "counter.py")
            doc.open()
            assert [d.code for d in await client.diagnostics_for(doc.uri, 1)] == ["mutation/buffer"]
            # A worker ran an export: had any refused connection's didOpen or command
            # been acted on, the marker model (opened first) would have run by now.
            assert not marker.exists()
            # The token a second client shows does not let it in while this one is served.
            other = await asyncio.to_thread(Raw.tcp, host, port)
            await asyncio.to_thread(other.send, initialize(root, {"exportlens": {"token": TOKEN}}), did_open(marker_model))
            [busy] = await asyncio.to_thread(other.until_closed)
            assert busy["error"]["code"] == -32803 and "serving another client" in busy["error"]["message"], busy
            assert await client.command("exportlens.status", doc.uri)  # this session is untouched

            # The control: the marker model does write its marker when a client may run it.
            assert not marker.exists()
            opened = Doc(client, marker_model)
            opened.open()
            await client.diagnostics_for(opened.uri, 1)
            assert marker.read_text() == "imported by an export; token: none"  # the workers are not handed the token
        assert await asyncio.to_thread(server.wait) == 0  # the session ended: the server exits, as on stdio
        assert "Traceback" not in server.stderr, server.stderr
        assert await asyncio.to_thread(server.leftovers) == []  # and its workers with it
    finally:
        server.stop()
    # One initialize was acted on, the editor's: nothing else looked for a model to warm.
    lines = trace.read_text().splitlines()
    assert len([line for line in lines if line.endswith("server: looking for a model file")]) == 1, lines
    assert "another client is being served" in server.stderr

    # The cache the server made: private to this user, though the server ran with umask 0.
    found = modes(cache)
    assert found["."] == 0o700
    assert {m for p, m in found.items() if (cache / p).is_dir()} == {0o700}, found
    files = {p: m for p, m in found.items() if (cache / p).is_file()}
    assert any(p.endswith(".entry") for p in files) and set(files.values()) == {0o600}, found


@pytest.mark.asyncio
async def test_a_generated_token_is_printed_and_works(tmp_path: Path) -> None:
    server = ServerProcess("--tcp", "localhost:0", cwd=tmp_path)
    try:
        host, port = await asyncio.to_thread(server.address)
        token = (await asyncio.to_thread(server.wait_line, r"^  (\S{40,})$")).group(1)
        assert '"initializationOptions": {"exportlens": {"token":' in server.stderr
        async with editor(tmp_path, {"token": token}, tcp=(host, port)) as client:
            status = await client.command("exportlens.status", (tmp_path / "m.py").as_uri())
            assert status["state"] == "idle"
        assert await asyncio.to_thread(server.wait) == 0
    finally:
        server.stop()


@pytest.mark.asyncio
async def test_a_token_file_is_read(tmp_path: Path) -> None:
    file = tmp_path / "token"
    file.write_text("from-a-file-0123456789abcdef\n")
    file.chmod(0o600)
    server = ServerProcess("--tcp", "127.0.0.1:0", "--token-file", str(file), cwd=tmp_path)
    try:
        host, port = await asyncio.to_thread(server.address)
        raw = await asyncio.to_thread(Raw.tcp, host, port)
        await asyncio.to_thread(raw.send, initialize(tmp_path, {"exportlens": {"token": TOKEN}}))
        [refused] = await asyncio.to_thread(raw.until_closed)
        assert refused["error"]["code"] == -32803
        async with editor(tmp_path, {"token": "from-a-file-0123456789abcdef"}, tcp=(host, port)) as client:
            assert (await client.command("exportlens.status", (tmp_path / "m.py").as_uri()))["state"] == "idle"
        assert await asyncio.to_thread(server.wait) == 0  # everything it logged is read
        assert "unknown setting" not in server.stderr, server.stderr  # the token is taken out, not read as a setting
    finally:
        server.stop()


def run_serve(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, *SERVE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("host", ["0.0.0.0", "[::]", "::"])
def test_a_host_beyond_loopback_is_refused_without_allow_remote(host: str, tmp_path: Path) -> None:
    proc = run_serve("--tcp", f"{host}:0", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "is not a loopback address" in proc.stderr and "--allow-remote" in proc.stderr and "SSH tunnel" in proc.stderr, proc.stderr
    assert "listening" not in proc.stderr


@pytest.mark.parametrize(("args", "message"), [(("--token-file", "t"), "options of --tcp"), (("--allow-remote",), "options of --tcp"), (("--socket", "s", "--token-file", "t"), "needs no token")])
def test_token_options_without_tcp_are_usage_errors(args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    proc = run_serve(*args, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_an_unreadable_token_file_is_refused_before_listening(tmp_path: Path) -> None:
    proc = run_serve("--tcp", "127.0.0.1:0", "--token-file", str(tmp_path / "missing"), cwd=tmp_path)
    assert proc.returncode == 2 and "--token-file" in proc.stderr and "No such file" in proc.stderr, proc.stderr
    assert "listening" not in proc.stderr


@pytest.mark.asyncio
async def test_allow_remote_listens_with_a_warning_and_still_needs_the_token(tmp_path: Path) -> None:
    server = ServerProcess("--tcp", "0.0.0.0:0", "--allow-remote", cwd=tmp_path, env={"EXPORTLENS_TOKEN": TOKEN})
    try:
        _, port = await asyncio.to_thread(server.address)
        warning = server.wait_line(r"warning: listening beyond this machine.*").group(0)
        assert "NOT encrypted" in warning and f"ssh -N -L {port}:127.0.0.1:{port}" in warning, warning
        raw = await asyncio.to_thread(Raw.tcp, "127.0.0.1", port)
        await asyncio.to_thread(raw.send, initialize(tmp_path, {}))
        [refused] = await asyncio.to_thread(raw.until_closed)
        assert refused["error"]["code"] == -32803
        async with editor(tmp_path, {"token": TOKEN}, tcp=("127.0.0.1", port)) as client:
            assert (await client.command("exportlens.status", (tmp_path / "m.py").as_uri()))["state"] == "idle"
    finally:
        server.stop()


@pytest.mark.asyncio
async def test_ipv6_loopback_in_brackets(tmp_path: Path) -> None:
    try:
        probe = socket.socket(socket.AF_INET6)
        probe.bind(("::1", 0))
        probe.close()
    except OSError:
        pytest.skip("this machine has no IPv6 loopback")
    server = ServerProcess("--tcp", "[::1]:0", cwd=tmp_path, env={"EXPORTLENS_TOKEN": TOKEN})
    try:
        host, port = await asyncio.to_thread(server.address)
        assert host == "::1"
        async with editor(tmp_path, {"token": TOKEN}, tcp=(host, port)) as client:
            assert (await client.command("exportlens.status", (tmp_path / "m.py").as_uri()))["state"] == "idle"
    finally:
        server.stop()


# ---------------------------------------------------------------- --socket


@pytest.mark.asyncio
async def test_a_unix_socket_is_private_and_works_end_to_end(workspace: tuple[Path, Path, Path], tmp_path: Path) -> None:
    root, _, _ = workspace
    path = tmp_path / "s.sock"
    server = ServerProcess("--socket", str(path), cwd=root, umask=0)
    try:
        assert await asyncio.to_thread(server.listening) == str(path)
        st = path.lstat()
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()
        async with editor(root, {"debounceMs": 0}, unix=str(path)) as client:
            doc = Doc(client, root / "counter.py")
            doc.open()
            assert [d.code for d in await client.diagnostics_for(doc.uri, 1, WAIT_S)] == ["mutation/buffer"]
        assert await asyncio.to_thread(server.wait) == 0
        assert "Traceback" not in server.stderr, server.stderr
        assert await asyncio.to_thread(server.leftovers) == []
    finally:
        server.stop()
    assert not path.exists()  # removed at exit


def test_a_socket_path_that_is_another_file_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    path.write_text("keep me")
    proc = run_serve("--socket", str(path), cwd=tmp_path)
    assert proc.returncode == 2 and "exists and is not a socket" in proc.stderr, proc.stderr
    assert path.read_text() == "keep me"


def test_a_live_socket_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    live = socket.socket(socket.AF_UNIX)
    live.bind(str(path))
    live.listen()
    try:
        proc = run_serve("--socket", str(path), cwd=tmp_path)
        assert proc.returncode == 2 and "another server is listening" in proc.stderr, proc.stderr
        assert stat.S_ISSOCK(path.lstat().st_mode)
    finally:
        live.close()


@pytest.mark.asyncio
async def test_a_stale_socket_is_replaced_and_sigterm_removes_it(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))  # left behind, as by a server that was killed: nobody listens
    stale.close()
    os.chmod(path, 0o666)
    server = ServerProcess("--socket", str(path), cwd=tmp_path)
    try:
        assert await asyncio.to_thread(server.listening) == str(path)
        assert stat.S_IMODE(path.lstat().st_mode) == 0o600
        raw = Raw(socket.socket(socket.AF_UNIX))
        await asyncio.to_thread(raw.sock.connect, str(path))
        await asyncio.to_thread(raw.send, initialize(tmp_path, {}))
        assert "result" in await asyncio.to_thread(raw.response, 0)
        server.proc.terminate()
        assert await asyncio.to_thread(server.wait) == 0
        raw.close()
    finally:
        server.stop()
    assert not path.exists(), server.stderr
