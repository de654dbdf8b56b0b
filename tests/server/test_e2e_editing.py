"""The real server through a real LSP client, as VS Code and as Neovim announce themselves.

One server per profile for the whole module (a warm worker makes each export ~1 s);
each test edits its own copy of an example. The VS Code 1.65 profile gets pushed
diagnostics in UTF-16; the Neovim 0.11 profile negotiates UTF-8 positions and, since
it cannot be asked to re-pull, also gets pushed diagnostics.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import AsyncIterator

import pytest
import pytest_asyncio
from lsprotocol import types

from tests.server.lsp_client import EXAMPLES, Doc, RecordingClient, codes, running_server

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["visual-studio-code", "neovim"])
async def session(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[RecordingClient, types.InitializeResult, Path]]:
    workspace = tmp_path_factory.mktemp(f"ws-{request.param}")
    options = {"cache_dir": str(workspace / ".cache"), "debounce_ms": 300}
    async with running_server(request.param, workspace, options) as (client, result):
        yield client, result, workspace


def copy(workspace: Path, example: str, name: str | None = None) -> Path:
    target = workspace / (name or Path(example).name)
    shutil.copy(EXAMPLES / example, target)
    return target


async def test_capabilities(session: tuple[RecordingClient, types.InitializeResult, Path]) -> None:
    client, result, _ = session
    caps = result.capabilities
    assert caps.text_document_sync is not None
    assert isinstance(caps.text_document_sync, types.TextDocumentSyncOptions)
    assert caps.text_document_sync.change == types.TextDocumentSyncKind.Incremental
    assert caps.hover_provider
    assert caps.execute_command_provider is not None
    assert set(caps.execute_command_provider.commands) == {"exportlens.reexport", "exportlens.showGraph", "exportlens.clearCache", "exportlens.status", "exportlens.graph", "exportlens.trust"}
    assert caps.inlay_hint_provider and caps.code_lens_provider and caps.code_action_provider
    # Neither profile can be asked to pull again, so both get pushed diagnostics only.
    assert caps.diagnostic_provider is None
    assert client.encoding == ("utf-8" if client.capabilities and client.capabilities.general and client.capabilities.general.position_encodings else "utf-16")


async def test_open_edit_break_fix(session: tuple[RecordingClient, types.InitializeResult, Path]) -> None:
    client, _, workspace = session
    doc = Doc(client, copy(workspace, "counter.py"))
    tokens_before = set(client.progress_reports)
    doc.open()
    opened = await client.diagnostics_for(doc.uri, 1)
    assert codes(opened) == [("mutation/buffer", doc.line_of("self.steps.add_(1)"))]
    [d] = opened
    assert d.source == "exportlens" and d.severity == types.DiagnosticSeverity.Information
    assert d.code_description is not None and d.code_description.href.endswith("#mutation-buffer")
    line = doc.line_of("self.steps.add_(1)") + 1
    assert isinstance(d.data, dict) and d.data["target"] == "Counter" and d.data["id"].startswith(f"Counter|mutation/buffer|{line}:9-{line}:")

    # Progress: begin, "exporting Counter (1/1)", end, on a token the client created.
    [token] = set(client.progress_reports) - tokens_before
    reports = client.progress_reports[token]
    await client.until(lambda: reports and isinstance(reports[-1], types.WorkDoneProgressEnd), "the end of the progress")
    assert isinstance(reports[0], types.WorkDoneProgressBegin)
    assert any(getattr(v, "message", "") == "exporting Counter (1/1)" for v in client.progress_reports[token])

    broken = doc.replace("return x + self.steps", "return x + torch.ones(5)")
    after_break = await client.diagnostics_for(doc.uri, broken)
    eager = [x for x in after_break if x.code == "eager-error"]
    assert [x.range.start.line for x in eager] == [doc.line_of("return x + torch.ones(5)")]
    assert eager[0].severity == types.DiagnosticSeverity.Error

    fixed = doc.replace("return x + torch.ones(5)", "return x + self.steps")
    assert codes(await client.diagnostics_for(doc.uri, fixed)) == [("mutation/buffer", doc.line_of("self.steps.add_(1)"))]
    # Versions only move forward: no publish for an older version after a newer one.
    versions = [p.version for p in client.publishes(doc.uri)]
    assert versions == sorted(versions)


async def test_columns_in_the_negotiated_encoding(session: tuple[RecordingClient, types.InitializeResult, Path]) -> None:
    client, _, workspace = session
    path = copy(workspace, "counter.py", "counter_unicode.py")
    path.write_text(path.read_text().replace("        self.steps.add_(1)\n", '        s = "ü€😀"; self.steps.add_(1)\n'))
    doc = Doc(client, path)
    doc.open()
    [d] = await client.diagnostics_for(doc.uri, 1)
    line = doc.line_of("self.steps.add_(1)")
    text = doc.text.split("\n")[line]
    assert d.range.start == doc.position(line, text.index("self.steps.add_(1)"))
    assert d.range.end == doc.position(line, text.index("self.steps.add_(1)") + len("self.steps.add_(1)"))


async def test_hover_from_the_index_and_after_lines_shift(session: tuple[RecordingClient, types.InitializeResult, Path]) -> None:
    client, _, workspace = session
    doc = Doc(client, copy(workspace, "counter.py", "counter_hover.py"))
    doc.open()
    await client.diagnostics_for(doc.uri, 1)
    line = doc.line_of("self.steps.add_(1)")
    column = doc.text.split("\n")[line].index("steps")

    async def hover(line: int) -> types.Hover | None:
        return await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(doc.uri), doc.position(line, column)))

    found = await hover(line)
    assert found is not None and isinstance(found.contents, types.MarkupContent)
    assert "BUFFER_MUTATION" in found.contents.value and "b_steps" in found.contents.value
    # A line of code inserted above (a comment would be served at once, moved, from
    # the cache): the old index no longer matches the moved line...
    shifted = doc.replace("class Counter", "UNUSED = 1\nclass Counter")
    assert await hover(line + 1) is None
    # ...until the new export (and its index) is in.
    await client.diagnostics_for(doc.uri, shifted)
    again = await hover(line + 1)
    assert again is not None and isinstance(again.contents, types.MarkupContent) and "BUFFER_MUTATION" in again.contents.value


async def test_fifty_rapid_edits_publish_only_the_last_version(session: tuple[RecordingClient, types.InitializeResult, Path]) -> None:
    client, _, workspace = session
    doc = Doc(client, copy(workspace, "counter.py", "counter_rapid.py"))
    doc.open()
    await client.diagnostics_for(doc.uri, 1)
    seen = len(client.publishes(doc.uri))
    tokens_before = set(client.progress_reports)
    for i in range(49):
        doc.replace(f"add_({i + 1})", f"add_({i + 2})")
    last = doc.replace("return x + self.steps", "return x + torch.ones(7)")
    assert last == 51
    final = await client.diagnostics_for(doc.uri, last)
    assert [p.version for p in client.publishes(doc.uri)[seen:]] == [last]
    assert [x.range.start.line for x in final if x.code == "eager-error"] == [doc.line_of("torch.ones(7)")]
    assert len(set(client.progress_reports) - tokens_before) == 1  # one export for the burst


async def test_a_newer_version_kills_the_running_export(session: tuple[RecordingClient, types.InitializeResult, Path]) -> None:
    client, _, workspace = session
    # No pyproject here: the limit is the default 120 s, so only a kill frees the worker in time.
    doc = Doc(client, copy(workspace, "faults/hang.py", "spin.py"))
    tokens_before = set(client.progress_reports)
    doc.open()

    def running() -> bool:
        return any(getattr(v, "message", "") == "exporting Spin (1/1)" for t in set(client.progress_reports) - tokens_before for v in client.progress_reports[t])

    await client.until(running, "the endless export to start")
    fixed = doc.replace("while True: x = x + 0", "x = x + 0")
    assert codes(await client.diagnostics_for(doc.uri, fixed, timeout=90)) == []
    assert all(p.version == fixed for p in client.publishes(doc.uri))


async def test_close_clears_and_non_models_are_ignored(session: tuple[RecordingClient, types.InitializeResult, Path]) -> None:
    client, _, workspace = session
    doc = Doc(client, copy(workspace, "data_dependent.py"))
    doc.open()
    assert {c for c, _ in codes(await client.diagnostics_for(doc.uri, 1))} == {"data-dependent"}
    doc.close()
    await client.until(lambda: len(client.publishes(doc.uri)[-1].diagnostics) == 0, "cleared diagnostics")
    plain = workspace / "plain.py"
    plain.write_text("def helper():\n    return 1\n")
    other = Doc(client, plain)
    other.open()
    status = await client.command("exportlens.status", other.uri)
    assert status["state"] == "idle" and status["targets"] == []


async def test_commands(session: tuple[RecordingClient, types.InitializeResult, Path]) -> None:
    client, _, workspace = session
    doc = Doc(client, copy(workspace, "multi_targets.py"))
    doc.open()
    await client.diagnostics_for(doc.uri, 1)
    status = await client.command("exportlens.status", doc.uri)
    assert status["state"] in ("ok", "error") and status["version"] == 1
    names = [t["name"] for t in status["targets"]]
    assert len(names) >= 2 and all(t["status"] in ("ok", "error") for t in status["targets"])
    ok = [t["name"] for t in status["targets"] if t["status"] == "ok"]
    graph = await client.command("exportlens.showGraph", doc.uri)
    assert all(f"# {name}\n" in graph for name in names)
    one = await client.command("exportlens.showGraph", {"uri": doc.uri, "target": ok[0]})
    assert one.startswith(f"# {ok[0]}\n") and "def forward" in one and one.count("\n# ") == 0
    again = await client.command("exportlens.reexport", doc.uri)
    assert again["cached"] is False and [t["name"] for t in again["targets"]] == names
    removed = await client.command("exportlens.clearCache")
    assert removed >= 1
    assert await client.command("exportlens.clearCache") == 0
    with pytest.raises(Exception, match="no target"):
        await client.command("exportlens.showGraph", doc.uri, "NoSuchTarget")


async def test_the_server_never_loads_torch_and_stays_small(session: tuple[RecordingClient, types.InitializeResult, Path]) -> None:
    client, _, _ = session
    assert client._server is not None
    pid = client._server.pid
    maps = Path(f"/proc/{pid}/maps").read_text()
    assert "libtorch" not in maps and "/torch/" not in maps
    rss_kb = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmRSS:"))
    assert rss_kb < 150 * 1024, f"server RSS {rss_kb // 1024} MB"
