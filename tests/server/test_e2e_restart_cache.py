"""A helper broken on disk and restored, after a session of edits (issue 29): the
restored model is exported again once, from the cache, and a restarted server
serves it from the cache too.

The broken helper imports one more local module, so the same model text records
another dependency list (as a job forked from a worker that preloaded a library
does, or a module run from an editor's text). The manifest kept only the newest
list, so the restore missed a result the cache held and ran a job; and the check
for files changed during an export also counted the restore, which the watcher
already reports, so it was exported twice.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.server.lsp_client import EXAMPLES, Doc, RecordingClient, codes, running_server

pytestmark = pytest.mark.asyncio

HELPERS = "WIDTH = 3\n\n\ndef bump(x):\n    return x + 1\n"
BROKEN = "import extra\n\nraise ValueError('helpers is broken')\n"
MODEL = '''import torch
from torch import nn

from helpers import WIDTH, bump


class Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(1))

    def forward(self, x):
        self.steps.add_(1)
        return bump(x) + self.steps


model = Counter()
example_args = (torch.randn(WIDTH),)
'''
RETURN = "        return bump(x) + self.steps"


def _write(path: Path, text: str) -> None:
    """As a formatter or git writes: a temporary file renamed over the original."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def _jobs(client: RecordingClient) -> int:
    """Exports that ran a job (each reports work-done progress; a cache hit none)."""
    return sum(any(getattr(r, "kind", "") == "begin" for r in reports) for reports in client.progress_reports.values())


def _again(client: RecordingClient, name: str) -> list[str]:
    return [m.message for m in client.log_messages if "exporting it again" in m.message and f"({name})" in m.message]


async def test_a_restored_helper_is_exported_once_from_the_cache_and_after_a_restart(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    pyproject = project / "pyproject.toml"
    pyproject.write_text("[tool.exportlens]\ntimeout = 120\n")
    helpers = project / "helpers.py"
    helpers.write_text(HELPERS)
    (project / "extra.py").write_text("EXTRA = 1\n")
    (project / "counter.py").write_text(MODEL)
    shutil.copy(EXAMPLES / "faults" / "segfault.py", project / "segfault.py")
    options = {"cache": True, "cacheDir": str(tmp_path / "cache")}

    async with running_server("visual-studio-code", project, options) as (client, _):
        doc = Doc(client, project / "counter.py")
        doc.open()
        clean = codes(await client.diagnostics_for(doc.uri, 1))
        assert clean == [("mutation/buffer", doc.line_of("self.steps.add_(1)"))]
        # Typing in the editor: a data-dependent branch, an eager error, a burst of
        # edits, and back to the text on disk (served from the cache).
        version = doc.replace(RETURN, "        if x.sum() > 0:\n            return x\n" + RETURN)
        assert "data-dependent" in [c for c, _ in codes(await client.diagnostics_for(doc.uri, version))]
        version = doc.replace("        if x.sum() > 0:\n            return x\n", "        x = x[:2] + x\n")
        assert "eager-error" in [c for c, _ in codes(await client.diagnostics_for(doc.uri, version))]
        for new in ("x[:1]", "x[:2]", "x[:1]"):
            version = doc.replace(doc.text[doc.text.index("x[:") : doc.text.index("x[:") + 5], new)
        version = doc.replace("        x = x[:1] + x\n", "")
        assert doc.text == MODEL
        assert codes(await client.diagnostics_for(doc.uri, version)) == clean
        # A model that crashes its job, beside it.
        crash = Doc(client, project / "segfault.py")
        crash.open()
        assert [c for c, _ in codes(await client.diagnostics_for(crash.uri, 1))] == ["worker-crash"]

        # The helper broken on disk, then restored as soon as the error is shown.
        seen, jobs = len(client.publishes(doc.uri)), _jobs(client)
        _write(helpers, BROKEN)
        broken = await client.until(lambda: [p for p in client.publishes(doc.uri)[seen:] if p.diagnostics != [] and codes(p.diagnostics) != clean], "the broken helper's error")
        assert broken[0].version == version
        assert _jobs(client) == jobs + 1
        seen, jobs, again = len(client.publishes(doc.uri)), _jobs(client), len(_again(client, "helpers.py"))
        _write(helpers, HELPERS)
        await client.until(lambda: [p for p in client.publishes(doc.uri)[seen:] if codes(p.diagnostics) == clean], "the model clean again")
        # A change the watcher reports after everything the restore caused: had the
        # restore been exported twice, its second line would have come before this.
        pyproject.write_text(pyproject.read_text())
        await client.until(lambda: _again(client, "pyproject.toml"), "the export pyproject.toml's change causes")
        await client.until(lambda: client.publishes(doc.uri)[-1] is not client.publishes(doc.uri)[seen], "its result")
        assert _again(client, "helpers.py")[again:] == ["exportlens: counter.py depends on changed files (helpers.py); exporting it again"]
        # The restored text is the first export's: from the cache, no job.
        assert _jobs(client) == jobs, [m.message for m in client.log_messages]

    # A new server on the same cache folder: the model's result comes from the cache.
    async with running_server("visual-studio-code", project, options) as (client, _):
        doc = Doc(client, project / "counter.py")
        doc.open()
        assert codes(await client.diagnostics_for(doc.uri, 1)) == clean
        status = await client.command("exportlens.status", doc.uri)
        assert status["cached"] is True
        assert _jobs(client) == 0
