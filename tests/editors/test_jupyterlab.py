"""JupyterLab with jupyterlab-lsp, configured as docs/editors.md says, in headless Chromium.

A real ``jupyter lab`` (no token, a free port, its config, data, settings and
runtime folders in the test's temporary folder) serves a project holding a real
nbformat-4 notebook in a subfolder: markdown between code cells, a line magic, a
shell escape, an import of a module beside the notebook, a helper whose branch on a
tensor's value fails the export, and a last cell that trains (it writes
``TRAINED``). Its ``jupyter_server_config.json`` is the JSON block of the page's
"JupyterLab" section, with only the interpreter's path filled in; and once more
without ``requires_documents_on_disk``, jupyter-lsp's default.

jupyterlab-lsp sends the notebook's code as one Python text document
(``core/project/virtual_documents.py``): at the notebook's own path with the
documented config, under ``.virtual_documents/`` by default. The test reads the
page's DOM: the CodeMirror underline of the diagnostic sits in the helper's cell, on
the branch, and nowhere else; the extension's diagnostics panel gives its message,
code and cell. The training cell never ran, the module beside the notebook was
found, and a copy of the code was written to disk only by default. Then the helper is
rewritten in the page with ``torch.where`` and the underline goes away.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import chromium
from tests.conftest import ROOT
from tests.notebooks import FIXED_HELPER, HELPER_LINE, MODEL_CELLS, notebook_json

PAGE = ROOT / "docs" / "editors.md"
INTERPRETER = "/path/to/project/.venv/bin/python"  # the page's placeholder
START_S = 120.0
EXPORT_S = 240.0  # the first export starts a worker and imports torch on a busy machine

# tests.notebooks's cells with an import of the module beside the notebook: from
# .virtual_documents/ it would not be found.
CELLS = [*MODEL_CELLS[:2], ("code", "from layers import SCALE"), *MODEL_CELLS[2:]]
HELPER = next(i for i, (_, text) in enumerate(CELLS) if text.startswith("def helper"))
LAYERS = "SCALE = 2\n"


def documented_config() -> dict:
    """The JSON block of docs/editors.md's "JupyterLab" section."""
    section = PAGE.read_text(encoding="utf-8").split("\n## JupyterLab", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```json\n(.*?)\n```", section, re.S)
    assert block, "docs/editors.md's JupyterLab section has no JSON block"
    return json.loads(block.group(1))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(params=["documented", "on disk"])
def lab(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path, bool]]:
    """``jupyter lab`` serving a project; yields its URL and the project folder.
    "documented": the page's config, so the extension sends the notebook's own path.
    "on disk": without ``requires_documents_on_disk``, as jupyter-lsp's default: the
    extension sends ``.virtual_documents/notebooks/model.ipynb`` and writes it there."""
    project = tmp_path / "project"
    (project / "notebooks").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "lab"\nversion = "0"\n', encoding="utf-8")
    (project / "notebooks" / "model.ipynb").write_text(notebook_json(CELLS), encoding="utf-8")
    (project / "notebooks" / "layers.py").write_text(LAYERS, encoding="utf-8")
    config = documented_config()
    if request.param == "on disk":
        del config["LanguageServerManager"]["language_servers"]["exportlens"]["requires_documents_on_disk"]
    (tmp_path / "jupyter-config").mkdir()
    (tmp_path / "jupyter-config" / "jupyter_server_config.json").write_text(json.dumps(config).replace(INTERPRETER, sys.executable), encoding="utf-8")
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
        JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "lab-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "lab-workspaces"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    port = free_port()
    log = open(tmp_path / "jupyter.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
            f"--ServerApp.root_dir={project}", "--IdentityProvider.token=", "--ServerApp.password=",
            # window.jupyterapp: the test opens the diagnostics panel with the app's command.
            "--LabApp.expose_app_in_browser=True",
            # Only the documented server: one found on this machine could outrank it.
            "--LanguageServerManager.autodetect=False",
            *(["--allow-root"] if os.geteuid() == 0 else []),
        ],
        cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_S
        while True:
            try:
                with urllib.request.urlopen(f"{url}/lsp/status", timeout=5) as r:
                    status = json.loads(r.read())
                break
            except OSError:
                assert proc.poll() is None, (tmp_path / "jupyter.log").read_text()
                assert time.monotonic() < deadline, "jupyter lab did not answer: " + (tmp_path / "jupyter.log").read_text()[-3000:]
                time.sleep(0.5)
        assert "exportlens" in status["specs"], status  # the documented spec was read
        yield url, project, request.param == "on disk"
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        log.close()


CELL_MARKS = """Array.from(document.querySelectorAll('.jp-Notebook .jp-Cell')).map(c => ({
  code: c.classList.contains('jp-CodeCell'),
  marks: Array.from(c.querySelectorAll('.cm-lintRange')).map(m => [m.className, m.textContent]),
}))"""


def marks(browser: chromium.Browser) -> list[dict]:
    return list(browser.js(CELL_MARKS) or [])


def click(browser: chromium.Browser, element: str) -> None:
    """A real mouse click in the middle of the element the JavaScript ``element`` names."""
    x, y = browser.js(f"(() => {{ const r = {element}.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()")
    for kind in ("mousePressed", "mouseReleased"):
        browser.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)


def test_the_diagnostic_is_shown_on_the_helpers_cell(lab: tuple[str, Path, bool]) -> None:
    url, project, on_disk = lab
    with chromium.Browser(1400, 1000) as browser:
        browser.go(f"{url}/lab/tree/notebooks/model.ipynb")
        browser.wait("the notebook's cells", lambda: len(marks(browser)) == len(CELLS), timeout=START_S)
        shown = browser.wait("an exportlens underline", lambda: [c for c in marks(browser) if c["marks"]], timeout=EXPORT_S)

        cells = marks(browser)
        underlined = [i for i, c in enumerate(cells) if c["marks"]]
        assert underlined == [HELPER], cells  # the helper's cell, no other
        [(cls, text)] = cells[HELPER]["marks"]
        assert "cm-lintRange-error" in cls and text == "if x.sum() > 0:", shown

        # The extension's diagnostics panel: the message, its code and its cell. The
        # command lists the current notebook's: a click in the cell makes it current.
        editor = f"document.querySelectorAll('.jp-Notebook .jp-Cell')[{HELPER}].querySelector('.cm-content')"
        click(browser, editor)
        browser.js("window.jupyterapp.commands.execute('lsp:show-diagnostics-panel')")
        rows_js = "Array.from(document.querySelectorAll('.lsp-diagnostics-listing tbody tr')).map(r => Array.from(r.cells).map(c => c.innerText))"
        rows = browser.wait("the diagnostics panel's rows", lambda: browser.js(rows_js), timeout=60)
        header = browser.js("Array.from(document.querySelectorAll('.lsp-diagnostics-listing thead th')).map(c => c.innerText.trim())")
        assert len(rows) == 1, (header, rows)
        row = dict(zip(header, rows[0], strict=False))
        assert "depends on the value of a tensor" in row["Message"] and row["Code"] == "data-dependent", row
        assert row["Source"] == "exportlens" and row["Cell"] == str(HELPER + 1), row  # numbered from 1, markdown included
        assert row["Line:Ch"] == f"{HELPER_LINE - 1}:4", row  # 0-based, in the cell

        # The notebook ran as check runs it: beside its module, without its training cell.
        assert not (project / "notebooks" / "TRAINED").exists() and not (project / "TRAINED").exists()
        # The extension's copy of the notebook's code, only when the config asks for one.
        assert (project / ".virtual_documents" / "notebooks" / "model.ipynb").exists() == on_disk

        # Rewrite the helper in its cell: the underline goes.
        click(browser, editor)
        browser.call("Input.dispatchKeyEvent", type="keyDown", key="a", code="KeyA", modifiers=2, windowsVirtualKeyCode=65)
        browser.call("Input.dispatchKeyEvent", type="keyUp", key="a", code="KeyA", modifiers=2, windowsVirtualKeyCode=65)
        browser.call("Input.insertText", text=FIXED_HELPER.rstrip("\n"))
        browser.wait("the helper's new text", lambda: browser.js(f"{editor}.innerText").strip() == FIXED_HELPER.strip(), timeout=30)
        browser.wait("no underline", lambda: not any(c["marks"] for c in marks(browser)), timeout=EXPORT_S)
        browser.wait("an empty diagnostics panel", lambda: not browser.js(rows_js), timeout=60)
        assert not (project / "notebooks" / "TRAINED").exists()

