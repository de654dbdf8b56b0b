"""Who may use a socket server: the token of ``serve --tcp`` and the first message.

Over stdio the client is the editor that started the server. Over a socket it is
whoever connects, and the server's job is to run the model code of the files that
client opens. So a connection is admitted by its first message alone, before any
of it reaches pygls: it must be ``initialize``, carrying the token (``--tcp``) in
``initializationOptions.exportlens.token``, while no other client is being served.
Anything else gets an error response (for a request) and the connection is closed:
no document, command or workspace message of it is acted on, no worker starts.

The token: ``$EXPORTLENS_TOKEN``, else the first line of ``--token-file``, else one
made here (``secrets``) and printed on stderr. Compared in constant time
(``hmac.compare_digest``) on its UTF-8 bytes. The token is removed from the
``initialize`` that is handed on, so the server's settings, state and logs never hold it.

Pure functions: :mod:`exportlens.server.listener` does the I/O.
"""

from __future__ import annotations

import copy
import hmac
import os
import secrets
import stat
from dataclasses import dataclass
from typing import Any, Mapping

from exportlens.server.config import SECTION, TOKEN_KEY

ENV = "EXPORTLENS_TOKEN"
KEY = TOKEN_KEY  # in the exportlens section of initializationOptions
MIN_LENGTH = 16  # a shorter token can be guessed one connection at a time: warned about
MAX_FILE_BYTES = 4096  # a token file is one line

# Error codes of a refused first message (LSP's own; the data follows InitializeError).
SERVER_NOT_INITIALIZED = -32002  # a request before initialize
INVALID_REQUEST = -32600  # a first message that is not JSON-RPC
REQUEST_FAILED = -32803  # initialize with a missing or wrong token, or while another client is served

HOW = f'pass it in initialize as "initializationOptions": {{"exportlens": {{"{KEY}": "..."}}}}'


class TokenError(ValueError):
    """The token cannot be read (a usage error: ``serve`` exits 2)."""


@dataclass(frozen=True)
class Token:
    value: str
    source: str  # "$EXPORTLENS_TOKEN", "--token-file PATH" or "generated"
    warnings: tuple[str, ...] = ()


def token_for(environ: Mapping[str, str], token_file: str | None) -> Token:
    """The token of a ``serve --tcp`` run, from the environment, the file or ``secrets``."""
    warnings: list[str] = []
    given = environ.get(ENV, "").strip()
    if given:
        if token_file is not None:
            warnings.append(f"${ENV} is set: --token-file {token_file} is not read")
        found = Token(given, f"${ENV}")
    elif token_file is not None:
        found = Token(_read_token_file(token_file, warnings), f"--token-file {token_file}")
    else:
        return Token(secrets.token_urlsafe(32), "generated")
    if len(found.value) < MIN_LENGTH:
        warnings.append(f"the token from {found.source} has {len(found.value)} characters; one of {MIN_LENGTH} or more random ones is much harder to guess")
    return Token(found.value, found.source, tuple(warnings))


def _read_token_file(path: str, warnings: list[str]) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO does not block us
    except OSError as e:
        raise TokenError(f"--token-file {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TokenError(f"--token-file {path}: not a regular file")
        data = os.read(fd, MAX_FILE_BYTES + 1)
    except OSError as e:
        raise TokenError(f"--token-file {path}: {e.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise TokenError(f"--token-file {path}: over {MAX_FILE_BYTES} bytes; a token file holds the token on one line")
    try:
        lines = data.decode("utf-8").strip().splitlines()
    except UnicodeDecodeError:
        raise TokenError(f"--token-file {path}: not UTF-8 text") from None
    if not lines or not lines[0].strip():
        raise TokenError(f"--token-file {path}: empty; write the token on its first line")
    if st.st_mode & 0o077:
        warnings.append(f"--token-file {path} can be read by other users (mode {stat.S_IMODE(st.st_mode):o}); chmod 600 it")
    return lines[0].strip()


def matches(given: Any, expected: str) -> bool:
    """Whether the client's ``given`` token is ``expected``, in constant time."""
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8"))


# ---------------------------------------------------------------- the first message


@dataclass(frozen=True)
class Admission:
    """What to do with a connection, given its first message."""

    message: dict[str, Any] | None  # admitted: the initialize to hand to pygls, without the token
    refusal: str | None = None  # refused: why (logged)
    response: dict[str, Any] | None = None  # refused: the error response to send first, if any


def _section(message: dict[str, Any]) -> dict[str, Any] | None:
    """The exportlens section of the initialize's options, nested or flat (as
    ``config.section_of`` reads it), or None."""
    params = message.get("params")
    options = params.get("initializationOptions") if isinstance(params, dict) else None
    if not isinstance(options, dict):
        return None
    inner = options.get(SECTION)
    return inner if isinstance(inner, dict) else options


def given_token(message: dict[str, Any]) -> Any:
    section = _section(message)
    return section.get(KEY) if section is not None else None


def without_token(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with the token taken out of its options (a copy)."""
    out = copy.deepcopy(message)
    section = _section(out)
    if section is not None:
        section.pop(KEY, None)
    return out


def _error(msg_id: Any, code: int, text: str) -> dict[str, Any]:
    usable = isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool)
    return {"jsonrpc": "2.0", "id": msg_id if usable else None, "error": {"code": code, "message": f"exportlens: {text}", "data": {"retry": False}}}


def admit(message: Any, token: str | None, *, busy: bool) -> Admission:
    """Admit or refuse a connection by its first message. ``token`` None: none is
    needed (``--socket``); ``busy``: another client is being served."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        return Admission(None, "the first message is not a JSON-RPC request", _error(None, INVALID_REQUEST, "expected initialize"))
    method = message["method"]
    if "id" not in message:
        return Admission(None, f"the first message is the notification {method!r}, not initialize")
    if method != "initialize":
        return Admission(None, f"the first message is {method!r}, not initialize", _error(message["id"], SERVER_NOT_INITIALIZED, f"the server is not initialized: send initialize first (with the token: {HOW})"))
    if token is not None:
        given = given_token(message)
        if given is None:
            return Admission(None, "initialize without a token", _error(message["id"], REQUEST_FAILED, f"this server needs a token: {HOW}"))
        if not matches(given, token):
            return Admission(None, "initialize with a wrong token", _error(message["id"], REQUEST_FAILED, "wrong token"))
    if busy:
        return Admission(None, "another client is being served", _error(message["id"], REQUEST_FAILED, "the server is serving another client; it serves one at a time"))
    return Admission(without_token(message))
