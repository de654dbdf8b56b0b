"""Through the real server and a real LSP client (issue 36): the server runs no code
of a folder its user has not trusted. Each test points the server at its own,
empty configuration folder (``EXPORTLENS_CONFIG_DIR``), not the session's record that
trusts every test folder (``tests/conftest.py``).

The model file writes a sentinel when it runs: in an untrusted folder the sentinel
never appears and the server starts no worker process at all (so nothing of the
folder can have run); trusting it -- by ``exportlens trust``, the quick fix's
``exportlens.trust``, or a client that says its workspace is trusted -- exports it
(and the sentinel appears, proving the wait was long enough to see it)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, Union

import pytest
from lsprotocol import types

from tests.conftest import run_cli
from tests.server.listening import ServerProcess
from tests.server.lsp_client import Doc, RecordingClient, children, running_server
from tests.server.test_e2e_sockets import editor

pytestmark = pytest.mark.asyncio

MODEL = """\
import pathlib

pathlib.Path(__file__).with_name("ran.txt").write_text("the model's code ran")

import torch
from torch import nn


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros(1))

    def forward(self, x):
        self.steps.add_(1)
        return x * 2


model = Counter()
example_args = (torch.randn(3),)
"""


def _project(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A cloned-looking folder with a model, and an environment whose trust record is empty."""
    ws = tmp_path / "cloned"
    ws.mkdir()
    (ws / "model.py").write_text(MODEL)
    config = tmp_path / "config"
    return ws, config, {"EXPORTLENS_CONFIG_DIR": str(config)}


def _tell_actions_from_commands(client: RecordingClient) -> None:
    """lsprotocol reads any code action that carries a command as a bare ``Command``
    (it looks for the key, not at its type); a client tells them apart as LSP says:
    a ``Command``'s ``command`` is a string, a ``CodeAction``'s an object."""
    converter = client.protocol._converter

    def structure(obj: Any, _: type) -> types.Command | types.CodeAction:
        if isinstance(obj.get("command"), str):
            return converter.structure(obj, types.Command)
        return converter.structure(obj, types.CodeAction)

    converter.register_structure_hook(Union[types.Command, types.CodeAction], structure)


def _logged(client: RecordingClient, pattern: str) -> list[str]:
    return [m.message for m in client.log_messages if re.search(pattern, m.message)]


async def _notice(client: RecordingClient, doc: Doc) -> types.Diagnostic:
    [notice] = await client.diagnostics_for(doc.uri, 1)
    assert notice.code == "untrusted-folder" and notice.severity == types.DiagnosticSeverity.Information
    assert notice.range.start.line == 0
    return notice


async def _untrusted_and_idle(client: RecordingClient, doc: Doc, ws: Path) -> types.Diagnostic:
    """The notice came, the client was told how to trust, and nothing ran."""
    notice = await _notice(client, doc)
    assert str(ws) in notice.message and f"exportlens trust {ws}" in notice.message and "exportlens.trust" in notice.message
    [shown] = await client.until(lambda: [m for m in client.messages if "exportlens trust" in m.message], "the showMessage")
    assert f"exportlens trust {ws}" in shown.message and "exportlens.trust" in shown.message
    # The status answers after the open was handled: still no worker, no job, nothing run.
    status = await client.command("exportlens.status", doc.uri)
    assert status["workers"] == "not-started", status
    assert client._server is not None and children(client._server.pid) == set()
    assert not (ws / "ran.txt").exists()
    assert _logged(client, r"no trusted workspace folder; no worker is warmed")
    return notice


async def test_an_untrusted_folder_runs_nothing_and_the_quick_fix_trusts_and_exports_it(tmp_path: Path) -> None:
    ws, config, env = _project(tmp_path)
    (ws / "second.py").write_text(MODEL.replace("ran.txt", "ran2.txt"))
    async with running_server("visual-studio-code", ws, {"cache_dir": str(tmp_path / "cache")}, env=env, trusted=None) as (client, _):
        doc = Doc(client, ws / "model.py")
        doc.open()
        notice = await _untrusted_and_idle(client, doc, ws)
        # A second file of the folder: its own notice, but no second message box.
        second = Doc(client, ws / "second.py")
        second.open()
        await _notice(client, second)
        assert len([m for m in client.messages if "exportlens trust" in m.message]) == 1
        assert not (ws / "ran2.txt").exists() and children(client._server.pid) == set()  # type: ignore[union-attr]
        # An edit (and a save) of the untrusted buffer: the notice for the new text, nothing run.
        version = doc.replace("x * 2", "x * 3")
        doc.save()
        [again] = await client.diagnostics_for(doc.uri, version)
        assert again.code == "untrusted-folder"
        assert len([m for m in client.messages if "exportlens trust" in m.message]) == 1
        assert not (ws / "ran.txt").exists() and children(client._server.pid) == set()  # type: ignore[union-attr]
        notice = again

        _tell_actions_from_commands(client)
        actions = await client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(doc.uri),
                range=notice.range,
                context=types.CodeActionContext(diagnostics=[notice]),
            )
        )
        [action] = actions or []
        assert isinstance(action, types.CodeAction) and action.command is not None
        assert action.command.command == "exportlens.trust" and list(action.command.arguments or []) == [str(ws)]
        assert action.kind == types.CodeActionKind.QuickFix

        # The client runs the action's command: trusted, and exported without a restart.
        answer = await client.command(action.command.command, *(action.command.arguments or []))
        assert answer == {"trusted": [str(ws)]}
        await client.until(lambda: [p for p in client.publishes(doc.uri) if [d.code for d in p.diagnostics] == ["mutation/buffer"]], "the model's own diagnostics")
        await client.until(lambda: [p for p in client.publishes(second.uri) if [d.code for d in p.diagnostics] == ["mutation/buffer"]], "the second model's")
        assert (ws / "ran.txt").exists() and (ws / "ran2.txt").exists()
    # What the command wrote is the user's record, private.
    record = config / "trusted.json"
    assert record.stat().st_mode & 0o777 == 0o600
    assert str(ws) in run_cli("trust", "--list", env=env).stdout.splitlines()


async def test_after_exportlens_trust_the_same_open_exports(tmp_path: Path) -> None:
    ws, config, env = _project(tmp_path)
    async with running_server("visual-studio-code", ws, {"cache_dir": str(tmp_path / "cache")}, env=env, trusted=None) as (client, _):
        doc = Doc(client, ws / "model.py")
        doc.open()
        await _untrusted_and_idle(client, doc, ws)

    proc = run_cli("trust", str(ws), env=env)
    assert proc.returncode == 0, proc.stderr
    async with running_server("visual-studio-code", ws, {"cache_dir": str(tmp_path / "cache")}, env=env, trusted=None) as (client, _):
        doc = Doc(client, ws / "model.py")
        doc.open()
        assert [d.code for d in await client.diagnostics_for(doc.uri, 1)] == ["mutation/buffer"]
        assert (ws / "ran.txt").exists()
        assert not [m for m in client.messages if "exportlens trust" in m.message]

    # Forgotten: the folder is untrusted again.
    (ws / "ran.txt").unlink()
    assert run_cli("trust", "--forget", str(ws), env=env).returncode == 0
    async with running_server("visual-studio-code", ws, {"cache_dir": str(tmp_path / "cache")}, env=env, trusted=None) as (client, _):
        doc = Doc(client, ws / "model.py")
        doc.open()
        await _untrusted_and_idle(client, doc, ws)


async def test_a_client_that_says_trusted_exports_without_a_question(tmp_path: Path) -> None:
    ws, config, env = _project(tmp_path)
    async with running_server("visual-studio-code", ws, {"cache_dir": str(tmp_path / "cache")}, env=env, trusted=True) as (client, _):
        doc = Doc(client, ws / "model.py")
        doc.open()
        assert [d.code for d in await client.diagnostics_for(doc.uri, 1)] == ["mutation/buffer"]
        assert (ws / "ran.txt").exists()
        assert not [m for m in client.messages if "exportlens trust" in m.message]
        # The client vouches for its workspace folders, not for a file beside them.
        other = tmp_path / "other"
        other.mkdir()
        (other / "model.py").write_text(MODEL)
        outside = Doc(client, other / "model.py")
        outside.open()
        await _notice(client, outside)
        assert not (other / "ran.txt").exists()
    assert not (config / "trusted.json").exists()  # the client's word is not written down


async def test_a_client_that_says_not_trusted_leaves_it_to_the_record(tmp_path: Path) -> None:
    ws, config, env = _project(tmp_path)
    async with running_server("visual-studio-code", ws, {"cache_dir": str(tmp_path / "cache")}, env=env, trusted=False) as (client, _):
        doc = Doc(client, ws / "model.py")
        doc.open()
        await _untrusted_and_idle(client, doc, ws)


@pytest.mark.parametrize("bad", ["world-writable", "garbage"])
async def test_a_bad_trust_record_is_ignored_with_a_log_line(tmp_path: Path, bad: str) -> None:
    ws, config, env = _project(tmp_path)
    config.mkdir(mode=0o700)
    record = config / "trusted.json"
    if bad == "world-writable":
        record.write_text(f'{{"version": 1, "folders": ["{ws}"]}}\n')
        record.chmod(0o666)
        why = r"writable by other users \(mode 0666\)"
    else:
        record.write_text("{not json")
        why = r"not JSON"
    async with running_server("visual-studio-code", ws, {"cache_dir": str(tmp_path / "cache")}, env=env, trusted=None) as (client, _):
        doc = Doc(client, ws / "model.py")
        doc.open()
        await _untrusted_and_idle(client, doc, ws)
        [line] = await client.until(lambda: _logged(client, r"ignoring the trust record"), "the log line")
        assert str(record) in line and re.search(why, line) and "nothing is trusted" in line


async def test_the_cli_runs_in_an_untrusted_folder(tmp_path: Path) -> None:
    ws, config, env = _project(tmp_path)
    proc = run_cli("check", "--format", "json", str(ws), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "mutation/buffer" in proc.stdout and (ws / "ran.txt").exists()
    assert not config.exists()


async def test_a_socket_server_follows_the_same_rule(tmp_path: Path) -> None:
    """``serve --socket`` (as ``--tcp``, after its token): the client that connects is
    admitted, not trusted; the folder still needs the user's trust."""
    ws, config, env = _project(tmp_path)
    path = tmp_path / "s.sock"
    server = ServerProcess("--socket", str(path), cwd=ws, env=env)
    try:
        assert await asyncio.to_thread(server.listening) == str(path)
        async with editor(ws, {"debounceMs": 0, "cacheDir": str(tmp_path / "cache")}, unix=str(path)) as client:
            doc = Doc(client, ws / "model.py")
            doc.open()
            notice = await _notice(client, doc)
            assert f"exportlens trust {ws}" in notice.message and not (ws / "ran.txt").exists()
            assert await client.command("exportlens.trust") == {"trusted": [str(ws)]}  # default: the workspace folder
            await client.until(lambda: [p for p in client.publishes(doc.uri) if [d.code for d in p.diagnostics] == ["mutation/buffer"]], "the export after trusting")
            assert (ws / "ran.txt").exists()
        assert await asyncio.to_thread(server.wait) == 0
    finally:
        server.stop()
