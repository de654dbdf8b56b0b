"""JSON-RPC as pygls speaks it, except that every request gets an answer.

pygls 2 turns an incoming message into its typed form (``structure_message``)
before it dispatches it. When the params do not fit the method's type (``null``,
a string for a line number, a negative line, no ``textDocument``), that step raises
out of the read loop, which logs the error and goes on: the request is never
answered, and the client waits for it forever. Here such a request is answered with
an ``InvalidParams`` error for its id (``InvalidRequest`` with a null id when the
id itself is unusable); a notification is still only logged, as JSON-RPC says.

A request after ``shutdown`` is answered with ``InvalidRequest`` (the LSP rule),
where pygls dropped it silently.
"""

from __future__ import annotations

import logging
from typing import Any

from cattrs.errors import ClassValidationError
from cattrs.v import format_exception, transform_error
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger(__name__)

MAX_DETAILS = 3  # validation errors named in one error message


class _Answered:
    """What ``structure_message`` returns for a request it already answered."""


ANSWERED = _Answered()


def is_request(data: Any) -> bool:
    return isinstance(data, dict) and "method" in data and "id" in data and "error" not in data


def usable_id(msg_id: Any) -> bool:
    return isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool)


def why(error: JsonRpcException, params: Any) -> str:
    """What did not fit, in cattrs' words (``invalid value for type, expected int @ $.position.character``)."""
    cause = error.__cause__
    if isinstance(cause, ClassValidationError):
        details = transform_error(cause, path="$", format_exception=_format)
        more = f" (and {len(details) - MAX_DETAILS} more)" if len(details) > MAX_DETAILS else ""
        return "; ".join(details[:MAX_DETAILS]) + more
    if not isinstance(params, dict):
        return f"expected an object, got {json_type(params)}"
    return f"{type(cause).__name__}: {cause}" if cause is not None else error.message


def _format(exc: BaseException, type_: type | None) -> str:
    # A validator's own words say more than cattrs' "invalid value" (the line is -1).
    if type_ is None and type(exc) is ValueError and exc.args:
        return f"invalid value ({exc})"
    return format_exception(exc, type_)


def json_type(value: Any) -> str:
    names = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array"}
    return names.get(type(value), type(value).__name__)


def quiet_unreadable(record: logging.LogRecord) -> bool:
    """pygls logs a message it cannot read with the whole nested traceback, at error
    level; ``ExportLensProtocol`` says what did not fit in one line, so pygls' record
    is kept for debug logging only."""
    if str(record.msg).startswith("Unable to deserialize message"):
        return logging.getLogger().isEnabledFor(logging.DEBUG)
    return True


class ExportLensProtocol(LanguageServerProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        logging.getLogger("pygls.protocol.json_rpc").addFilter(quiet_unreadable)  # once: addFilter skips a repeat

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if not is_request(data):
                # A notification (or a response): never answered, as JSON-RPC says.
                log.warning("%s dropped: %s", data.get("method") or "a response", why(error, data.get("params")))
                raise
            msg_id, method = data.get("id"), data.get("method")
            reply: JsonRpcException
            if usable_id(msg_id) and isinstance(method, str):
                reply = JsonRpcInvalidParams(f"{method}: invalid params: {why(error, data.get('params'))}")
            else:
                msg_id, reply = None, JsonRpcInvalidRequest(f"not a valid request: {why(error, data)}")
            log.warning("request %r refused: %s", msg_id, reply.message)
            # pygls types the id as str | int; JSON-RPC answers an unusable one with null.
            self._send_response(msg_id, error=reply.to_response_error())  # type: ignore[arg-type]
            return ANSWERED

    def handle_message(self, message: Any) -> None:
        if message is ANSWERED:
            return
        if self._shutdown and isinstance(getattr(message, "id", None), (int, str)) and getattr(message, "method", types.EXIT) != types.EXIT:
            self._send_response(message.id, error=JsonRpcInvalidRequest("the server is shutting down").to_response_error())
            return
        super().handle_message(message)
