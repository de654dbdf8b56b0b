"""A command refused for a bad argument is one warning line in the log, not a traceback."""

from __future__ import annotations

import logging
import sys

from pygls.exceptions import JsonRpcInvalidParams

from exportlens.server.app import quiet_invalid_params


def _record(exc: BaseException) -> logging.LogRecord:
    try:
        raise exc
    except BaseException:
        info = sys.exc_info()
    return logging.LogRecord("pygls.protocol.json_rpc", logging.ERROR, __file__, 1, 'Exception occurred for message "%s"', (7,), info)


def test_invalid_params_become_one_warning_line() -> None:
    record = _record(JsonRpcInvalidParams("no target 'Nope' in file:///m.py"))
    assert quiet_invalid_params(record)
    text = logging.Formatter().format(record)
    assert record.levelno == logging.WARNING
    assert text == "request refused: no target 'Nope' in file:///m.py"


def test_real_errors_keep_their_traceback() -> None:
    record = _record(RuntimeError("a bug"))
    assert quiet_invalid_params(record)
    text = logging.Formatter().format(record)
    assert record.levelno == logging.ERROR and "Traceback" in text and "RuntimeError: a bug" in text
