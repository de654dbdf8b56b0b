"""A local module a model imports changes on disk: the open model is exported again."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.server.lsp_client import EXAMPLES, Doc, running_server

pytestmark = pytest.mark.asyncio


def atomic_write(path: Path, text: str) -> None:
    """How editors and formatters save: a temporary file renamed over the original."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


async def test_changing_a_helper_on_disk_re_diagnoses_the_model(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLES / "pyproject_target", project)
    models, layers = project / "pkg" / "models.py", project / "pkg" / "layers.py"
    good_layers = layers.read_text()
    # The cache is on, as users run it: an edit landing while a result is stored must
    # not file the old result under the new bytes (it did, now and then, before the
    # cache keyed entries by the bytes the export read).
    async with running_server("visual-studio-code", project, {"cache": True}) as (client, _):
        doc = Doc(client, models)
        doc.open()
        assert await client.diagnostics_for(doc.uri, 1) == []  # declared in pyproject.toml
        seen = len(client.publishes(doc.uri))

        # Break the helper: the model fails when it runs, at its own line.
        assert "return x + torch.relu(self.linear(x))" in good_layers
        atomic_write(layers, good_layers.replace("return x + torch.relu(self.linear(x))", "return x + torch.relu(self.linear(x))[:, :2]"))
        published = await client.until(lambda: client.publishes(doc.uri)[seen:], "a new export after the helper changed")
        assert published[0].version == 1  # the buffer did not change: same version, new result
        status = await client.command("exportlens.status", doc.uri)
        assert [d.code for d in published[0].diagnostics] == ["eager-error"], (status, [m.message for m in client.log_messages])
        seen += len(published)

        atomic_write(layers, good_layers)
        fixed = await client.until(lambda: [p for p in client.publishes(doc.uri)[seen:] if len(p.diagnostics) == 0], "the model clean again", timeout=60)
        assert fixed[0].version == 1


def _project(tmp_path: Path, **files: str) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 60\n")
    for name, text in files.items():
        (project / name.replace("__", ".")).write_text(text)
    return project


MODEL = "import torch\nfrom helpers import WIDTH\n\nmodel = torch.nn.Linear(8, WIDTH)\nexample_args = (torch.randn(2, 8),)\n"


async def test_a_helper_that_raised_then_was_fixed_is_seen_after_a_restart_and_live(tmp_path: Path) -> None:
    """The helper that raised was never recorded as a dependency: its import-error
    was cached and served forever, to a restarted server too."""
    project = _project(tmp_path, model__py=MODEL, helpers__py="raise ValueError('not yet')\n")
    helpers, model = project / "helpers.py", project / "model.py"
    options = {"cache": True, "cacheDir": str(tmp_path / "cache")}
    async with running_server("visual-studio-code", project, options) as (client, _):
        doc = Doc(client, model)
        doc.open()
        assert [d.code for d in await client.diagnostics_for(doc.uri, 1)] == ["import-error"]
    atomic_write(helpers, "WIDTH = 4\n")
    async with running_server("visual-studio-code", project, options) as (client, _):
        doc = Doc(client, model)
        doc.open()
        assert await client.diagnostics_for(doc.uri, 1, timeout=120) == []  # not the cached error
        seen = len(client.publishes(doc.uri))
        atomic_write(helpers, "raise ValueError('broken again')\n")
        broken = await client.until(lambda: [p for p in client.publishes(doc.uri)[seen:] if p.diagnostics], "the import-error again", timeout=120)
        assert [d.code for d in broken[0].diagnostics] == ["import-error"]


async def test_changing_a_file_the_model_reads_re_diagnoses_the_model(tmp_path: Path) -> None:
    reads = (
        "import json\nfrom pathlib import Path\n\nimport torch\n\n"
        "config = json.loads((Path(__file__).parent / 'config.json').read_text())\n"
        "model = torch.nn.Linear(8, 4)\nexample_args = (torch.randn(2, config['features']),)\n"
    )
    project = _project(tmp_path, model__py=reads, config__json='{"features": 8}')
    async with running_server("visual-studio-code", project, {"cache": True, "cacheDir": str(tmp_path / "cache")}) as (client, _):
        doc = Doc(client, project / "model.py")
        doc.open()
        assert await client.diagnostics_for(doc.uri, 1) == []
        seen = len(client.publishes(doc.uri))
        atomic_write(project / "config.json", '{"features": 6}')  # the example no longer fits the model
        broken = await client.until(lambda: [p for p in client.publishes(doc.uri)[seen:] if p.diagnostics], "an error after config.json changed", timeout=120)
        assert broken[0].version == 1 and all(d.severity == 1 for d in broken[0].diagnostics)
        seen = len(client.publishes(doc.uri))
        atomic_write(project / "config.json", '{"features": 8}')
        await client.until(lambda: [p for p in client.publishes(doc.uri)[seen:] if not p.diagnostics], "clean again", timeout=120)


# Reads config.json, then waits (bounded) for the test's go-ahead: the test changes
# config.json in that pause, while the export runs and before its result says that
# config.json is a dependency (so the watcher has no reason to report the change).
READS_THEN_WAITS = (
    "import json\nimport time\nfrom pathlib import Path\n\nimport torch\n\n"
    "here = Path(__file__).parent\n"
    "config = json.loads((here / 'config.json').read_text())\n"
    "(here / 'read.flag').write_text('read')\n"
    "deadline = time.monotonic() + 60\n"
    "while not (here / 'go.flag').exists() and time.monotonic() < deadline:\n"
    "    time.sleep(0.02)\n"
    "model = torch.nn.Linear(8, 4)\nexample_args = (torch.randn(2, config['features']),)\n"
)


async def test_a_file_changed_while_the_model_exported_is_read_again(tmp_path: Path) -> None:
    """The change lands before the result names the file: no file event will ever
    report it, so the result must be checked against the disk once it is in (it was
    shown clean for good, contradicting a fresh export)."""
    project = _project(tmp_path, model__py=READS_THEN_WAITS, config__json='{"features": 8}')
    async with running_server("visual-studio-code", project, {"cache": False}) as (client, _):
        doc = Doc(client, project / "model.py")
        doc.open()
        flag = project / "read.flag"
        # The model has read config.json: after the server's first worker started
        # (torch imported, warmed up), as slow as any first export on a loaded machine.
        deadline = time.monotonic() + 240
        while not flag.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert flag.exists(), [m.message for m in client.log_messages]
        atomic_write(project / "config.json", '{"features": 6}')  # the example no longer fits the model
        (project / "go.flag").write_text("go")
        broken = await client.until(lambda: [p for p in client.publishes(doc.uri) if p.diagnostics], "the error of config.json as it is now", timeout=120)
        assert broken[0].version == 1 and all(d.severity == 1 for d in broken[0].diagnostics)
        assert any("changed during its export (config.json)" in m.message for m in client.log_messages)


# Writes a module next to itself (then imports it) and fails on a missing module: each
# change of gen.py used to export it again (import-error: "a module may have appeared";
# gen.py: a dependency), and each export wrote gen.py again -- about five a second.
WRITES_ITSELF = 'from pathlib import Path\n\nPath(__file__).with_name("gen.py").write_text("VALUE = 1\\n")\nimport gen\nimport not_installed_anywhere\nexample_args = (1,)\n'


@pytest.mark.adversarial
async def test_an_export_that_writes_a_module_next_to_itself_does_not_export_again(tmp_path: Path) -> None:
    """Counted, not timed: after the first export, two rewrites of pyproject.toml each
    cause one export. Every change the exports made to gen.py was written before the
    rewrite that follows it, and the watcher delivers events in order: had any of them
    caused an export, a log line naming gen.py would come before or with the rewrite's."""
    project = _project(tmp_path, model__py=WRITES_ITSELF)
    pyproject = project / "pyproject.toml"
    # No cache: every export must run the model, which rewrites gen.py each time (a
    # cached result would be served without running it, and could never loop).
    async with running_server("visual-studio-code", project, {"cache": False}) as (client, _):
        doc = Doc(client, project / "model.py")
        doc.open()
        assert [d.code for d in await client.diagnostics_for(doc.uri, 1)] == ["import-error"]
        assert (project / "gen.py").exists()

        def again() -> list[str]:
            return [m.message for m in client.log_messages if "exporting it again" in m.message]

        async def rewrite_pyproject(round: int) -> None:
            published = len(client.publishes(doc.uri))
            pyproject.write_text(pyproject.read_text())  # the same bytes: a change event all the same
            await client.until(lambda: len(again()) >= round, f"export #{round + 1}, caused by pyproject.toml")
            await client.until(lambda: len(client.publishes(doc.uri)) > published, f"the result of export #{round + 1}")

        await rewrite_pyproject(1)
        await rewrite_pyproject(2)
        assert again() == ["exportlens: model.py depends on changed files (pyproject.toml); exporting it again"] * 2
        assert len(client.publishes(doc.uri)) == 3
        begun = [token for token, reports in client.progress_reports.items() if any(getattr(r, "kind", "") == "begin" for r in reports)]
        assert len(begun) == 3  # three jobs ran: the first export and one per rewrite
