"""The server over raw stdio, as a buggy or hostile client drives it: every request
gets a response (a result or a JSON-RPC error) however malformed its params, and a
frame whose Content-Length does not match its body never leaves the server deaf.

The client here is a few lines of framing, not pytest-lsp: the point is to send
bytes a well-behaved client library never would.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.server.lsp_client import SERVE

pytestmark = pytest.mark.adversarial

ANSWER_S = 60.0  # generous: a loaded 2-core machine; an answer normally takes milliseconds


def frame(message: Any) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class RawServer:
    """``python -P -m exportlens serve`` with its stdio as bytes: frames out, parsed messages in."""

    def __init__(self, cwd: Path) -> None:
        env = dict(os.environ, PYTHONWARNINGS="ignore")
        self.proc = subprocess.Popen([sys.executable, *SERVE], cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self.pending: list[dict[str, Any]] = []

    def _read_stdout(self) -> None:
        out = self.proc.stdout
        assert out is not None
        try:
            while True:
                length = None
                while True:
                    line = out.readline()
                    if not line:
                        return
                    if line == b"\r\n":
                        break
                    name, _, value = line.decode("ascii").partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                assert length is not None, "the server sent a frame without Content-Length"
                self.messages.put(json.loads(out.read(length)))
        finally:
            self.messages.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.decode(errors="replace"))

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def response(self, msg_id: Any, timeout: float = ANSWER_S) -> dict[str, Any]:
        """The response to request ``msg_id`` (other messages are kept aside)."""
        for i, message in enumerate(self.pending):
            if message.get("id") == msg_id and "method" not in message:
                return self.pending.pop(i)
        while True:
            try:
                message = self.messages.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no response to request {msg_id!r} within {timeout} s; stderr: {''.join(self.stderr)[-3000:]}") from None
            if message is None:
                raise AssertionError(f"the server closed its output before answering {msg_id!r} (exit {self.proc.poll()}); stderr: {''.join(self.stderr)[-3000:]}")
            if message.get("id") == msg_id and "method" not in message:
                return message
            self.pending.append(message)

    def initialize(self, root: Path) -> None:
        self.send(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"processId": None, "rootUri": root.as_uri(), "capabilities": {}}}))
        assert "result" in self.response(0)
        self.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))

    def status(self, msg_id: int, uri: str) -> dict[str, Any]:
        """A good request: exportlens.status for ``uri`` (idle: the file is not open)."""
        self.send(frame({"jsonrpc": "2.0", "id": msg_id, "method": "workspace/executeCommand", "params": {"command": "exportlens.status", "arguments": [uri]}}))
        return self.response(msg_id)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send(frame({"jsonrpc": "2.0", "id": "bye", "method": "shutdown"}))
                self.send(frame({"jsonrpc": "2.0", "method": "exit"}))
            except OSError:
                pass
            try:
                self.proc.wait(timeout=ANSWER_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def server(tmp_path: Path) -> Any:
    raw = RawServer(tmp_path)
    try:
        raw.initialize(tmp_path)
        yield raw
    finally:
        raw.close()


POSITION = {"line": 0, "character": 0}
DOC = {"uri": "file:///nowhere/m.py"}
INVALID = -32602  # InvalidParams
# (method, params, the error code expected; None: any answer, a result or an error)
MALFORMED: list[tuple[str, Any, int | None]] = [
    ("textDocument/hover", None, INVALID),
    ("textDocument/hover", [], INVALID),
    ("textDocument/hover", "hover", INVALID),
    ("textDocument/hover", {"position": POSITION}, INVALID),  # no textDocument
    ("textDocument/hover", {"textDocument": DOC}, INVALID),  # no position
    # cattrs reads any value as a string (5 as "5"): no such document, no hover.
    ("textDocument/hover", {"textDocument": {"uri": 5}, "position": POSITION}, None),
    ("textDocument/hover", {"textDocument": {"uri": []}, "position": POSITION}, None),
    ("textDocument/hover", {"textDocument": DOC, "position": {"line": "one", "character": 0}}, INVALID),
    ("textDocument/hover", {"textDocument": DOC, "position": {"line": -1, "character": 0}}, INVALID),
    ("textDocument/hover", {"textDocument": DOC, "position": {"line": 0, "character": -5}}, INVALID),
    ("textDocument/hover", {"textDocument": DOC, "position": {"line": 2**40, "character": 0}}, INVALID),
    ("textDocument/hover", {"textDocument": None, "position": None}, INVALID),
    ("workspace/executeCommand", None, INVALID),
    ("workspace/executeCommand", {"command": None}, INVALID),
    ("workspace/executeCommand", {"command": "exportlens.status", "arguments": "not a list"}, None),  # read as ["n", "o", ...]
    ("workspace/executeCommand", {"command": "exportlens.status", "arguments": [{"uri": 5}]}, INVALID),
    ("workspace/executeCommand", {"arguments": []}, INVALID),
    ("initialize", None, INVALID),
]


def test_every_malformed_request_gets_an_answer_and_the_server_keeps_serving(server: RawServer, tmp_path: Path) -> None:
    for msg_id, (method, params, _) in enumerate(MALFORMED, start=100):
        server.send(frame({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}))
    for msg_id, (method, params, code) in enumerate(MALFORMED, start=100):
        answer = server.response(msg_id)
        assert "error" in answer or "result" in answer, (method, params, answer)
        if code is not None:
            assert answer.get("error", {}).get("code") == code, (method, params, answer)
    status = server.status(999, (tmp_path / "m.py").as_uri())
    assert status["result"]["state"] == "idle", status


def test_string_ids_are_answered_with_the_same_id(server: RawServer, tmp_path: Path) -> None:
    server.send(frame({"jsonrpc": "2.0", "id": "h-1", "method": "textDocument/hover", "params": None}))
    assert server.response("h-1")["error"]["code"] == -32602
    assert server.status(1, (tmp_path / "m.py").as_uri())["result"]["state"] == "idle"


def test_a_request_whose_id_is_unusable_is_refused_with_a_null_id(server: RawServer, tmp_path: Path) -> None:
    server.send(frame({"jsonrpc": "2.0", "id": [7], "method": "textDocument/hover", "params": None}))
    assert server.response(None)["error"]["code"] == -32600  # InvalidRequest
    assert server.status(1, (tmp_path / "m.py").as_uri())["result"]["state"] == "idle"


def test_malformed_notifications_are_dropped_without_an_answer(server: RawServer, tmp_path: Path) -> None:
    for params in (None, [], {"textDocument": {"uri": "file:///x.py"}}, {"textDocument": None, "contentChanges": 3}):
        server.send(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": params}))
        server.send(frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": params}))
    # The next answer is to the next request: nothing was sent for the notifications.
    answer = server.status(1, (tmp_path / "m.py").as_uri())
    assert answer["result"]["state"] == "idle"
    assert not [m for m in server.pending if "method" not in m], server.pending


def test_a_request_after_shutdown_is_refused(server: RawServer) -> None:
    server.send(frame({"jsonrpc": "2.0", "id": 1, "method": "shutdown"}))
    assert server.response(1)["result"] is None
    server.send(frame({"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": {"textDocument": DOC, "position": POSITION}}))
    assert server.response(2)["error"]["code"] == -32600  # InvalidRequest: shutting down
    server.send(frame({"jsonrpc": "2.0", "method": "exit"}))
    assert server.proc.wait(timeout=ANSWER_S) == 0


def status_frame(msg_id: int, root: Path) -> bytes:
    return frame({"jsonrpc": "2.0", "id": msg_id, "method": "workspace/executeCommand", "params": {"command": "exportlens.status", "arguments": [(root / "m.py").as_uri()]}})


def relabel(data: bytes, length: int) -> bytes:
    """``data`` (one frame) with its Content-Length replaced by ``length``."""
    body = data.split(b"\r\n\r\n", 1)[1]
    return b"Content-Length: %d\r\n\r\n" % length + body


def test_a_content_length_longer_than_its_body_does_not_leave_the_server_deaf(server: RawServer, tmp_path: Path) -> None:
    # The long frame swallows the start of the next ones; all three are answered.
    long = status_frame(1, tmp_path)
    server.send(relabel(long, len(long.split(b"\r\n\r\n", 1)[1]) + 40) + status_frame(2, tmp_path) + status_frame(3, tmp_path))
    for msg_id in (2, 3, 1):
        assert server.response(msg_id)["result"]["state"] == "idle"
    assert any("Content-Length" in line and "does not match" in line for line in server.stderr), server.stderr


def test_a_content_length_longer_than_everything_sent_recovers_at_the_next_message(server: RawServer, tmp_path: Path) -> None:
    # Nothing follows the long frame at first: it waits for its body, then the next
    # message shows where it ended, and both are answered.
    long = status_frame(1, tmp_path)
    server.send(relabel(long, 10_000))
    server.send(status_frame(2, tmp_path))
    assert server.response(1)["result"]["state"] == "idle"
    assert server.response(2)["result"]["state"] == "idle"


def test_a_content_length_shorter_than_its_body_is_read_anyway(server: RawServer, tmp_path: Path) -> None:
    short = status_frame(1, tmp_path)
    server.send(relabel(short, len(short.split(b"\r\n\r\n", 1)[1]) - 25) + status_frame(2, tmp_path))
    assert server.response(1)["result"]["state"] == "idle"
    assert server.response(2)["result"]["state"] == "idle"


GARBAGE = [
    b"Garbage without a colon\r\n\r\n",
    b"Content-Length: banana\r\n\r\n",
    b"Content-Length: 99999999999\r\n\r\n",  # 93 GiB: never read, never allocated
    b"Content-Length: -5\r\n\r\n",
    b"\x00\xff\xfe binary noise \r\n",
    b"Content-Length: 5\r\n\r\nhello",  # a body that is not JSON
    b"Content-Length: 0\r\n\r\n",
    b"Content-Length: 200000\r\n\r\n" + b"[" * 199_999 + b"]",  # nesting too deep to parse
    b"\r\n\r\n\r\n",
    b"Content-Length: 12\r\nContent-Length: 13\r\n\r\n",
]


@pytest.mark.parametrize("junk", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_between_frames_is_skipped(server: RawServer, tmp_path: Path, junk: bytes) -> None:
    server.send(junk + status_frame(1, tmp_path) + status_frame(2, tmp_path))
    assert server.response(1)["result"]["state"] == "idle"
    assert server.response(2)["result"]["state"] == "idle"
    assert server.proc.poll() is None
