"""The LSP base protocol on stdio (``Content-Length`` frames), surviving bad frames.

pygls 2's reader trusts every ``Content-Length``: when one is larger than its body,
it reads the next frames into that body, fails to parse it, and from then on finds
every header glued to the end of the previous body (``...}Content-Length: 52``),
which its line matcher never recognises again: the server stays alive but never
answers. A length that is too short, or a header with a huge length, does the same.

:class:`LspFrameDecoder` (no I/O, so it is tested on its own) resynchronises instead.
It relies on one fact: the bytes ``Content-Length: <digits>\\r\\n`` never occur
inside a JSON text (raw CR LF may not appear in its strings, and the header name
may not appear outside them), so wherever they match, a frame begins. A body that
runs into such a header, or that is not JSON, is read up to that header: when it
holds one JSON message (a client that counted characters instead of bytes) the
message is taken anyway, otherwise the bytes are dropped; either way a warning
names what happened on stderr, and the frames after it are read as usual.

:func:`run_stdio` replaces pygls' ``start_io``: :class:`StdinMessages` reads and
decodes stdin in a daemon thread, the event loop dispatches each message.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import queue
import re
from typing import Any, BinaryIO, Callable, Iterator

from pygls.exceptions import JsonRpcException
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer

from exportlens.server import threads

log = logging.getLogger(__name__)

MAX_BODY = 256 * 2**20  # a larger Content-Length is a corrupt header, not a message
MAX_HEADER = 8 * 1024  # a header block is a few dozen bytes
CHUNK = 64 * 1024
FRAME_HEADER = re.compile(rb"Content-Length[ \t]{0,8}:[ \t]{0,8}\d{1,12}[ \t]{0,8}\r\n", re.IGNORECASE)
OVERLAP = 64  # longer than any FRAME_HEADER match: a header split across two reads is still found
HEADER_LINE = re.compile(rb"([!-9;-~]+)[ \t]*:[ \t]*([^\r\n]*)")
LENGTH = re.compile(rb"\d{1,12}")
LEADING_BLANKS = re.compile(rb"[ \t\r\n]+")
HEADER_END = b"\r\n\r\n"

Warn = Callable[[str], None]


class _Signal:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


MORE = _Signal("MORE")  # not a whole message yet: wait for more bytes
DROPPED = _Signal("DROPPED")  # a frame was dropped: read on
EOF = _Signal("EOF")  # the client closed stdin


def content_length(block: bytes) -> int | None:
    """The Content-Length of a header block (its lines without the blank line), or None
    when the block is not a header (a line without ``name: value``, no or two lengths)."""
    length: int | None = None
    for line in block.split(b"\r\n"):
        match = HEADER_LINE.fullmatch(line)
        if match is None:
            return None
        if match.group(1).lower() == b"content-length":
            value = match.group(2).strip()
            if length is not None or not LENGTH.fullmatch(value):
                return None
            length = int(value)
    return length


def preview(data: bytes | bytearray, limit: int = 60) -> str:
    text = bytes(data[:limit]).decode("utf-8", errors="replace")
    return repr(text) + ("..." if len(data) > limit else "")


class LspFrameDecoder:
    """Bytes in (:meth:`feed`), JSON messages out (:meth:`messages`), in order."""

    def __init__(self, warn: Warn, max_body: int = MAX_BODY) -> None:
        self._buffer = bytearray()
        self._warn = warn
        self._max_body = max_body
        self._scanned = 0  # bytes of the current body already searched for a frame header

    @property
    def max_body(self) -> int:
        """The largest Content-Length taken as a frame; a larger one is skipped as corrupt."""
        return self._max_body

    @max_body.setter
    def max_body(self, value: int) -> None:
        self._max_body = value

    @property
    def pending(self) -> int:
        """Bytes received but not yet part of a message."""
        return len(self._buffer)

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def messages(self) -> Iterator[Any]:
        """Every whole message received so far."""
        while (found := self.next_message()) is not MORE:
            yield found

    def next_message(self) -> Any:
        """The next whole message, or MORE when it has not all arrived yet."""
        return self._next()

    def _next(self) -> Any:
        buf = self._buffer
        while True:
            blanks = LEADING_BLANKS.match(buf)
            if blanks:
                del buf[: blanks.end()]  # some clients end a body with a newline
            if not buf:
                return MORE
            end = buf.find(HEADER_END, 0, MAX_HEADER + len(HEADER_END))
            if end < 0:
                if len(buf) < MAX_HEADER:
                    return MORE
                if not self._resync(f"{MAX_HEADER} bytes without the end of a header ({preview(buf)})"):
                    return MORE
                continue
            length = content_length(bytes(buf[:end]))
            if length is None:
                if not self._resync(f"a header that is not one ({preview(buf[:end])})"):
                    return MORE
                continue
            if length > self._max_body:
                if not self._resync(f"a Content-Length of {length} bytes (more than {self._max_body})"):
                    return MORE
                continue
            found = self._body(end + len(HEADER_END), length)
            if found is not DROPPED:
                return found

    def _body(self, start: int, length: int) -> Any:
        """The message of the frame whose body starts at ``start``, MORE or DROPPED."""
        buf = self._buffer
        stop = start + length
        next_header = FRAME_HEADER.search(buf, max(start, start + self._scanned - OVERLAP))
        inside = next_header is not None and next_header.start() < stop
        if not inside:
            if len(buf) < stop:
                self._scanned = max(0, len(buf) - start)
                return MORE
            value = _loads(bytes(buf[start:stop]))
            if value is not MORE:
                del buf[:stop]
                self._scanned = 0
                return value
        # The Content-Length does not fit: read the message up to the next frame.
        limit = next_header.start() if next_header is not None else len(buf)
        value, used = _first_message(bytes(buf[start:limit]))
        if value is MORE and next_header is None:
            # A message longer than its Content-Length said, still arriving.
            self._scanned = max(0, len(buf) - start)
            return MORE
        self._scanned = 0
        if value is not MORE:
            self._warn(f"a frame's Content-Length ({length}) does not match its message ({used} bytes): read the message anyway")
            del buf[: start + used]
            return value
        self._warn(f"dropped a frame whose body is not a JSON message (Content-Length {length}: {preview(buf[start:limit])}); reading on at the next frame")
        del buf[:limit]
        return DROPPED

    def _resync(self, what: str) -> bool:
        """Drop bytes up to the next frame header; False when none is there yet."""
        buf = self._buffer
        match = FRAME_HEADER.search(buf, 1)
        if match is None:
            keep = min(len(buf), OVERLAP)
            dropped = len(buf) - keep
        else:
            dropped = match.start()
        if dropped:
            self._warn(f"{what}: skipped {dropped} bytes to the next frame")
            del buf[:dropped]
        self._scanned = 0
        return match is not None


def _loads(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nesting too deep for the parser
        return MORE


def _first_message(data: bytes) -> tuple[Any, int]:
    """A JSON object at the start of ``data`` and its length in bytes, or ``(MORE, 0)``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return MORE, 0
    try:
        value, end = json.JSONDecoder().raw_decode(text)
    except (ValueError, RecursionError):
        return MORE, 0
    if not isinstance(value, dict):
        return MORE, 0
    return value, len(text[:end].encode("utf-8"))


def encode(message: Any) -> bytes:
    """One message as a frame (the messages pygls does not send itself)."""
    body = json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


# ---------------------------------------------------------------- stdio


def dispatch(server: LanguageServer, value: Any) -> None:
    """Hand one decoded message to pygls, as its own reader would (minus the crash paths)."""
    protocol = server.protocol
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
        log.warning("LSP input: ignored a message that is not JSON-RPC 2.0 (%s)", type(value).__name__)
        return
    try:
        message = protocol.structure_message(value)
    except JsonRpcException:
        return  # a notification pygls could not read: the protocol logged it
    try:
        protocol.handle_message(message)
    except Exception as error:  # noqa: BLE001 - one message must not end the server
        log.exception("handling a message failed")
        try:
            server.report_server_error(error, JsonRpcException)
        except Exception:  # noqa: BLE001
            pass


def _reader(stdin: BinaryIO) -> Callable[[int], bytes]:
    """Read what has arrived (not a whole chunk). From the file descriptor when there
    is one: a daemon thread blocked inside the buffered reader would hold its lock,
    and closing stdin at exit would then abort the interpreter."""
    try:
        fd = stdin.fileno()
    except (OSError, ValueError, AttributeError):
        return getattr(stdin, "read1", stdin.read)  # type: ignore[no-any-return]
    return lambda n: os.read(fd, n)


class StdinMessages:
    """The decoded messages of stdin, one per :meth:`next`, read in a daemon thread.

    One thread round trip per message, as pygls' reader makes (it awaits a thread
    for each header line and body): the event loop runs what the previous message
    started (a scheduled export's first steps) before the next message is handled,
    and stdin is read only as fast as messages are handled. A daemon thread, so a
    client that never closes stdin cannot hold up the exit.
    """

    def __init__(self, stdin: BinaryIO) -> None:
        self._read = _reader(stdin)
        self._decoder = LspFrameDecoder(lambda message: log.warning("LSP input: %s", message))
        self._asks: queue.SimpleQueue[concurrent.futures.Future[Any]] = queue.SimpleQueue()
        threads.start(threads.STDIN, self._serve_asks)

    async def next(self) -> Any:
        """The next message, or EOF once the client closed stdin."""
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._asks.put(answer)
        return await asyncio.wrap_future(answer)

    def _serve_asks(self) -> None:
        while True:
            answer = self._asks.get()
            try:
                answer.set_result(self._next_message())
            except BaseException as error:  # noqa: BLE001 - the loop side raises it
                answer.set_exception(error)

    def _next_message(self) -> Any:
        while True:
            found = self._decoder.next_message()
            if found is not MORE:
                return found
            try:
                data = self._read(CHUNK)
            except (OSError, ValueError):
                data = b""
            if not data:
                if self._decoder.pending:
                    log.warning("LSP input: the client closed stdin in the middle of a frame (%d bytes unread)", self._decoder.pending)
                return EOF
            self._decoder.feed(data)


async def _serve(server: LanguageServer, stdin: BinaryIO) -> None:
    messages = StdinMessages(stdin)
    while (value := await messages.next()) is not EOF:
        dispatch(server, value)


def run_stdio(server: LanguageServer, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Serve the client on ``stdin``/``stdout`` until it closes stdin or sends ``exit``."""
    server.protocol.set_writer(StdoutWriter(stdout))
    try:
        asyncio.run(_serve(server, stdin))
    except BrokenPipeError:
        log.error("the client closed the connection; exiting")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
