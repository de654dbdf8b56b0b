"""The server on a socket: connections admitted one message at a time, one client served.

pygls' ``start_tcp`` hands every byte of every connection to the one protocol: the
first message of whoever connects is acted on. Here each connection is read on its
own (with :class:`~exportlens.server.framing.LspFrameDecoder`, so garbage is skipped,
never fatal) and nothing of it reaches pygls until its first message is admitted by
:func:`exportlens.server.auth.admit`: ``initialize`` with the token (``--tcp``). A
refused connection gets the error response and is closed, and the attempt is logged
(stderr) with the peer's address; what it sent after is never read.

One client at a time, as pygls serves: the first admitted connection is the
session, and the server exits when it ends (``exit``, or the client closing the
connection), as it does when stdin closes. A connection admitted while a session
runs is refused (another client is served); connections that have not yet shown
their first message are read at the same time, each bounded in size
(``FIRST_MESSAGE_MAX``) and time (``ADMIT_TIMEOUT_S``), at most ``MAX_WAITING`` at
once. So one client that connects and says nothing cannot keep the editor out; more
than ``MAX_WAITING`` silent connections at once can, until theirs time out (up to
``ADMIT_TIMEOUT_S`` each). Only who can reach the port can do that (loopback unless
``--allow-remote``), and it costs no more than a wait: nothing of theirs is run.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from typing import Any

from pygls.lsp.server import LanguageServer

from exportlens.server import auth
from exportlens.server.endpoints import Endpoint
from exportlens.server.framing import CHUNK, EOF, MAX_BODY, MORE, LspFrameDecoder, dispatch, encode

log = logging.getLogger(__name__)

ADMIT_TIMEOUT_S = 60.0  # an editor sends initialize at once; this is for a loaded machine
FIRST_MESSAGE_MAX = 4 * 2**20  # an initialize is a few KB; a larger first frame is skipped
MAX_WAITING = 32  # connections not yet admitted, at once
SEND_TIMEOUT_S = 10.0  # a refused client that does not read its error response
LINGER_S = 5.0  # ... and that does not close its side after it
LINGER_BYTES = 8 * 2**20


class Listener:
    def __init__(self, server: LanguageServer, endpoint: Endpoint) -> None:
        self.server = server
        self.endpoint = endpoint
        self.token = endpoint.token.value if endpoint.token is not None else None
        self.serving = False
        self.finished = asyncio.Event()
        self._waiting: set[asyncio.Task[Any]] = set()

    async def run(self) -> None:
        """Accept connections until the session ends (or SIGTERM)."""
        loop = asyncio.get_running_loop()
        servers = []
        for sock in self.endpoint.sockets:
            if sock.family == socket.AF_UNIX:
                servers.append(await asyncio.start_unix_server(self._connected, sock=sock))
            else:
                servers.append(await asyncio.start_server(self._connected, sock=sock))
        try:
            loop.add_signal_handler(signal.SIGTERM, self.finished.set)  # exit through the cleanup (the socket file)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
        loop.set_exception_handler(self._on_loop_error)
        try:
            await self.finished.wait()
        finally:
            for server in servers:
                server.close()
            for task in list(self._waiting):
                task.cancel()

    def _on_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        # A client that closes the connection while its shutdown request runs (Neovim
        # at exit does) ends the session; the handler is cancelled on the way out,
        # which is no error worth a traceback.
        if self.finished.is_set() and isinstance(context.get("exception"), asyncio.CancelledError):
            log.debug("cancelled at exit: %s", context.get("message"))
            return
        loop.default_exception_handler(context)

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = _peer(writer)
        session = False
        self._waiting.add(task)
        try:
            if self.finished.is_set():
                return
            if len(self._waiting) > MAX_WAITING:
                log.warning("refused a connection from %s: %d connections are waiting to be admitted already", peer, MAX_WAITING)
                return
            decoder = LspFrameDecoder(lambda m: log.warning("LSP input from %s: %s", peer, m), max_body=FIRST_MESSAGE_MAX)
            try:
                first = await asyncio.wait_for(_next(reader, decoder), ADMIT_TIMEOUT_S)
            except asyncio.TimeoutError:
                log.warning("closed the connection from %s: no initialize within %.0f s", peer, ADMIT_TIMEOUT_S)
                return
            if first is EOF:
                log.info("the connection from %s closed before its first message", peer)
                return
            admission = auth.admit(first, self.token, busy=self.serving)
            if admission.message is None:
                log.warning("refused the connection from %s: %s", peer, admission.refusal)
                if admission.response is not None:
                    await _send(writer, admission.response)
                await _linger(reader, writer)
                return
            session = True
            self._waiting.discard(task)
            try:
                await self._serve(peer, reader, writer, decoder, admission.message)
            except SystemExit:
                # pygls' ``exit`` handler exits the process from inside the handler;
                # here it ends the session (as stdin closing does on stdio).
                log.info("the client at %s sent exit", peer)
        except (ConnectionError, OSError) as e:
            log.info("the connection from %s failed: %s", peer, e)
        except Exception:  # noqa: BLE001 - one connection must not end the server
            log.exception("the connection from %s failed", peer)
        finally:
            self._waiting.discard(task)
            if session:
                self.finished.set()
            writer.close()

    async def _serve(self, peer: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, decoder: LspFrameDecoder, initialize: dict[str, Any]) -> None:
        """The session: this connection's messages go to pygls, its answers to it."""
        self.serving = True
        log.info("serving the client at %s", peer)
        decoder.max_body = MAX_BODY
        self.server.protocol.set_writer(writer)  # type: ignore[arg-type]  # write() and close(), as pygls' own TCP server passes
        dispatch(self.server, initialize)
        while True:
            while (value := decoder.next_message()) is not MORE:
                dispatch(self.server, value)
                await asyncio.sleep(0)  # what the message started runs before the next one, as on stdio
            data = await reader.read(CHUNK)
            if not data:
                if decoder.pending:
                    log.warning("LSP input: the client closed the connection in the middle of a frame (%d bytes unread)", decoder.pending)
                log.info("the client at %s closed the connection; exiting", peer)
                return
            decoder.feed(data)


async def _next(reader: asyncio.StreamReader, decoder: LspFrameDecoder) -> Any:
    """The connection's next message, or EOF."""
    while (found := decoder.next_message()) is MORE:
        data = await reader.read(CHUNK)
        if not data:
            return EOF
        decoder.feed(data)
    return found


async def _send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    try:
        writer.write(encode(message))
        await asyncio.wait_for(writer.drain(), SEND_TIMEOUT_S)
    except (ConnectionError, OSError, asyncio.TimeoutError):
        pass  # the client is gone or not reading: it is closed either way


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """End a refused connection so that the client reads its error response: closing
    a socket with unread input sends a reset, which may discard the response before
    the client read it (a client that sent initialize, initialized and didOpen at
    once). So: end our side, then drop what the client sends, unread, until it closes
    (or ``LINGER_S``, or ``LINGER_BYTES``)."""
    try:
        if writer.can_write_eof():
            writer.write_eof()
        dropped = 0
        async with asyncio.timeout(LINGER_S):
            while dropped <= LINGER_BYTES and (data := await reader.read(CHUNK)):
                dropped += len(data)
    except (ConnectionError, OSError, TimeoutError):
        pass


def _peer(writer: asyncio.StreamWriter) -> str:
    name = writer.get_extra_info("peername")
    if isinstance(name, tuple) and len(name) >= 2:
        return f"[{name[0]}]:{name[1]}" if ":" in str(name[0]) else f"{name[0]}:{name[1]}"
    return "a local client (Unix socket)"


def run(server: LanguageServer, endpoint: Endpoint) -> None:
    """Serve one client on ``endpoint`` until its session ends."""
    try:
        asyncio.run(Listener(server, endpoint).run())
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
