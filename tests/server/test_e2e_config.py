"""Settings from initializationOptions and didChangeConfiguration: bad values warn once
and fall back to the default; turning a code off republishes without it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lsprotocol import types

from tests.server.lsp_client import EXAMPLES, Doc, codes, running_server

pytestmark = pytest.mark.asyncio


async def test_bad_settings_warn_once_and_codes_can_be_turned_off(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "counter.py", tmp_path / "counter.py")
    options = {"timeout_s": "soon", "debounceMs": 150, "cache": False}
    async with running_server("neovim", tmp_path, options) as (client, _):
        doc = Doc(client, tmp_path / "counter.py")
        doc.open()
        assert codes(await client.diagnostics_for(doc.uri, 1)) == [("mutation/buffer", doc.line_of("self.steps.add_(1)"))]
        warnings = [m for m in client.messages if m.type == types.MessageType.Warning]
        assert len(warnings) == 1 and "exportlens.timeout_s" in warnings[0].message and "'soon'" in warnings[0].message
        status = await client.command("exportlens.status", doc.uri)
        assert status["settings"]["timeout_s"] == 120.0 and status["settings"]["debounce_ms"] == 150

        # The same bad value again (with a code turned off): no second box.
        seen = len(client.publishes(doc.uri))
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"exportlens": {"timeout_s": "soon", "diagnostics": {"mutation/buffer": False}}})
        )
        republished = await client.until(lambda: client.publishes(doc.uri)[seen:], "diagnostics republished without mutation/buffer")
        assert len(republished[0].diagnostics) == 0
        assert republished[0].version == 1
        assert len([m for m in client.messages if m.type == types.MessageType.Warning]) == 1
        status = await client.command("exportlens.status", doc.uri)
        assert status["settings"]["diagnostics"] == {"disabled": ["mutation/buffer"]}
        assert status["settings"]["debounce_ms"] == 150  # initializationOptions stay the base, key by key

        # A new bad value is a new problem: one more box, naming it.
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"exportlens": {"workers": 0}}))
        await client.until(lambda: len([m for m in client.messages if m.type == types.MessageType.Warning]) == 2, "a warning about workers")
        assert "exportlens.workers" in client.messages[-1].message
