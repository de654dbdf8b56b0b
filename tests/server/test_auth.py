"""Who a socket server admits, on its own: the token's sources and the first message.

The server through real sockets is ``test_e2e_sockets.py``; here each rule is one row.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from exportlens.server import auth, config

pytestmark = pytest.mark.adversarial

TOKEN = "s3cret-token-of-enough-length"


def initialize(options: Any = None, msg_id: Any = 1, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"processId": None, "rootUri": None, "capabilities": {}}
    if options is not None:
        params["initializationOptions"] = options
    return {"jsonrpc": "2.0", "id": msg_id, "method": "initialize", "params": params, **extra}


def test_the_right_token_is_admitted_and_taken_out_of_the_options() -> None:
    message = initialize({"exportlens": {"token": TOKEN, "debounceMs": 100}})
    admission = auth.admit(message, TOKEN, busy=False)
    assert admission.message is not None and admission.refusal is None and admission.response is None
    assert admission.message["params"]["initializationOptions"] == {"exportlens": {"debounceMs": 100}}
    assert TOKEN not in repr(admission.message)
    assert message["params"]["initializationOptions"]["exportlens"]["token"] == TOKEN  # the caller's message is not changed


def test_the_flat_section_form_carries_the_token_too() -> None:
    admission = auth.admit(initialize({"token": TOKEN}), TOKEN, busy=False)
    assert admission.message is not None
    assert admission.message["params"]["initializationOptions"] == {}


REFUSED: list[tuple[str, Any, str, int | None]] = [
    # (case, first message, refusal text, error code of the response; None: no response)
    ("no options", initialize(), "without a token", auth.REQUEST_FAILED),
    ("no token", initialize({"exportlens": {"debounceMs": 100}}), "without a token", auth.REQUEST_FAILED),
    ("wrong token", initialize({"exportlens": {"token": TOKEN + "x"}}), "wrong token", auth.REQUEST_FAILED),
    ("a prefix", initialize({"exportlens": {"token": TOKEN[:-1]}}), "wrong token", auth.REQUEST_FAILED),
    ("empty", initialize({"exportlens": {"token": ""}}), "wrong token", auth.REQUEST_FAILED),
    ("a number", initialize({"exportlens": {"token": 12345}}), "wrong token", auth.REQUEST_FAILED),
    ("a list", initialize({"exportlens": {"token": [TOKEN]}}), "wrong token", auth.REQUEST_FAILED),
    ("non-ASCII", initialize({"exportlens": {"token": "é" * 20}}), "wrong token", auth.REQUEST_FAILED),
    ("lone surrogate", initialize({"exportlens": {"token": "\ud800"}}), "wrong token", auth.REQUEST_FAILED),
    ("in another section", initialize({"other": {"token": TOKEN}}), "without a token", auth.REQUEST_FAILED),
    ("options not a map", initialize([TOKEN]), "without a token", auth.REQUEST_FAILED),
    ("params not a map", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": TOKEN}, "without a token", auth.REQUEST_FAILED),
    ("a request first", {"jsonrpc": "2.0", "id": 1, "method": "workspace/executeCommand", "params": {"command": "exportlens.status"}}, "not initialize", auth.SERVER_NOT_INITIALIZED),
    ("a notification first", {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {}}, "notification", None),
    ("initialize as a notification", {"jsonrpc": "2.0", "method": "initialize", "params": {"initializationOptions": {"exportlens": {"token": TOKEN}}}}, "notification", None),
    ("not JSON-RPC 2.0", {"id": 1, "method": "initialize"}, "not a JSON-RPC request", auth.INVALID_REQUEST),
    ("a JSON list", [initialize({"exportlens": {"token": TOKEN}})], "not a JSON-RPC request", auth.INVALID_REQUEST),
    ("a response", {"jsonrpc": "2.0", "id": 1, "result": None}, "not a JSON-RPC request", auth.INVALID_REQUEST),
]


@pytest.mark.parametrize(("case", "message", "why", "code"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_connection_is_refused_unless_its_first_message_is_initialize_with_the_token(case: str, message: Any, why: str, code: int | None) -> None:
    admission = auth.admit(message, TOKEN, busy=False)
    assert admission.message is None
    assert admission.refusal is not None and why in admission.refusal
    if code is None:
        assert admission.response is None
    else:
        assert admission.response is not None and admission.response["error"]["code"] == code
        assert TOKEN not in repr(admission.response) and TOKEN not in admission.refusal
        msg_id = message["id"] if code != auth.INVALID_REQUEST else None  # not a request: no id to answer
        assert admission.response["id"] == msg_id


def test_the_token_is_checked_before_saying_another_client_is_served() -> None:
    # An unauthenticated client learns nothing, not even that the server is busy.
    wrong = auth.admit(initialize({"exportlens": {"token": "guess"}}), TOKEN, busy=True)
    assert wrong.refusal is not None and "wrong token" in wrong.refusal
    right = auth.admit(initialize({"exportlens": {"token": TOKEN}}), TOKEN, busy=True)
    assert right.message is None and right.refusal is not None and "another client" in right.refusal
    assert right.response is not None and right.response["error"]["code"] == auth.REQUEST_FAILED


def test_without_a_token_to_check_initialize_alone_is_admitted() -> None:
    # --socket: the file's mode is the gate; a token a client sends anyway is dropped.
    admission = auth.admit(initialize({"exportlens": {"token": "whatever", "workers": 1}}), None, busy=False)
    assert admission.message is not None
    assert admission.message["params"]["initializationOptions"] == {"exportlens": {"workers": 1}}
    assert auth.admit({"jsonrpc": "2.0", "id": 1, "method": "shutdown"}, None, busy=False).message is None


def test_matches_compares_the_whole_token() -> None:
    assert auth.matches(TOKEN, TOKEN)
    assert not auth.matches(TOKEN + " ", TOKEN)
    assert not auth.matches(None, TOKEN)
    assert auth.matches("é" * 20, "é" * 20)


# ---------------------------------------------------------------- where the token comes from


def test_the_environment_comes_first(tmp_path: Path) -> None:
    file = tmp_path / "token"
    file.write_text("from-the-file-xxxxxxxxxxxx\n")
    file.chmod(0o600)
    found = auth.token_for({auth.ENV: "  from-the-environment-xxxx \n"}, str(file))
    assert (found.value, found.source) == ("from-the-environment-xxxx", "$EXPORTLENS_TOKEN")
    assert any("--token-file" in w and "not read" in w for w in found.warnings), found.warnings


def test_the_file_is_read_when_the_environment_has_none(tmp_path: Path) -> None:
    file = tmp_path / "token"
    file.write_text("\n  from-the-file-xxxxxxxxxxxx  \nsecond line\n")
    file.chmod(0o600)
    found = auth.token_for({auth.ENV: ""}, str(file))
    assert (found.value, found.warnings) == ("from-the-file-xxxxxxxxxxxx", ())


def test_a_token_file_others_can_read_is_warned_about(tmp_path: Path) -> None:
    file = tmp_path / "token"
    file.write_text("from-the-file-xxxxxxxxxxxx\n")
    file.chmod(0o644)
    found = auth.token_for({}, str(file))
    assert found.value == "from-the-file-xxxxxxxxxxxx"
    assert any("other users" in w and "644" in w for w in found.warnings), found.warnings


def test_a_short_token_is_warned_about() -> None:
    found = auth.token_for({auth.ENV: "abc"}, None)
    assert found.value == "abc" and any("3 characters" in w for w in found.warnings)


def test_without_either_a_fresh_random_token_is_made() -> None:
    one, two = auth.token_for({}, None), auth.token_for({}, None)
    assert one.source == two.source == "generated"
    assert one.value != two.value and len(one.value) >= 40 and not one.warnings


@pytest.mark.parametrize("kind", ["missing", "empty", "blank", "folder", "fifo", "binary", "huge"])
def test_a_token_file_that_holds_no_token_is_a_usage_error(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "token"
    if kind == "empty":
        path.write_text("")
    elif kind == "blank":
        path.write_text("  \n\n")
    elif kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)  # opened without blocking, refused as not a regular file
    elif kind == "binary":
        path.write_bytes(b"\xff\xfe\x00token")
    elif kind == "huge":
        path.write_text("x" * (auth.MAX_FILE_BYTES + 1))
    with pytest.raises(auth.TokenError, match="--token-file"):
        auth.token_for({}, str(path))
    if kind == "fifo":
        assert stat.S_ISFIFO(path.stat().st_mode)


def test_the_token_is_not_a_setting() -> None:
    # A client configured for --tcp that is started on stdio is not warned about it.
    settings, problems = config.parse({"token": TOKEN, "debounceMs": 100})
    assert problems == [] and settings.debounce_ms == 100
