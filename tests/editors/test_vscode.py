"""The VS Code extension, from its own unit tests to a real editor.

1. ``npm test`` in ``editors/vscode``: ``tsc --noEmit`` and the unit tests of the pure
   modules (settings mapping, interpreter choice, import check, status text).
2. ``scripts/package.sh``: esbuild bundle and ``vsce package`` into a ``.vsix``.
3. ``scripts/setup-code-server.sh`` (cached kit: Node 24, code-server, playwright-core,
   Debian's chromium), then ``test/e2e/run.mjs``: install the ``.vsix`` into code-server,
   open model files and read the Problems panel and a hover from the page. The expected
   problems come from ``exportlens check`` on the same files, so the editor must show
   exactly what the CLI reports, at the same lines.

Screenshots go to ``tests/editors/artifacts/`` (git-ignored); with
``EXPORTLENS_UPDATE_DOCS_IMAGES=1`` the problems and hover shots are also copied to
``docs/images/`` for the README.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, ROOT, check_json

EXTENSION = ROOT / "editors" / "vscode"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
MODEL_FILES = ["counter.py", "data_dependent.py"]


def _run(
    cmd: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def _tail(proc: subprocess.CompletedProcess[str], n: int = 4000) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-n:]}\n--- stderr\n{proc.stderr[-n:]}"


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """``npm ci`` from the committed lock file, unless node_modules already matches it."""
    assert shutil.which("npm"), "npm is needed for the VS Code extension (Node 20 and npm)"
    stamp = EXTENSION / "node_modules" / ".package-lock.json"
    lock = EXTENSION / "package-lock.json"
    if not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime:
        proc = _run(["npm", "ci", "--no-audit", "--no-fund"], EXTENSION, timeout=900)
        assert proc.returncode == 0, _tail(proc)
    return EXTENSION / "node_modules"


@pytest.fixture(scope="module")
def vsix(node_modules: Path) -> Path:
    proc = _run(["bash", "scripts/package.sh"], EXTENSION, timeout=600)
    assert proc.returncode == 0, _tail(proc)
    path = Path(proc.stdout.strip().splitlines()[-1])
    assert path.suffix == ".vsix" and path.is_file(), proc.stdout
    return path


def test_unit_tests_and_typecheck(node_modules: Path) -> None:
    proc = _run(["npm", "test"], EXTENSION, timeout=600)
    assert proc.returncode == 0, _tail(proc)
    # node's test runner summary: every unit test ran and passed.
    passed = re.search(r"^# pass (\d+)$", proc.stdout, re.M)
    failed = re.search(r"^# fail (\d+)$", proc.stdout, re.M)
    assert passed and failed, _tail(proc)
    assert int(passed.group(1)) >= 20 and int(failed.group(1)) == 0, _tail(proc)


def test_vsix_holds_the_bundle_and_manifest(vsix: Path) -> None:
    with zipfile.ZipFile(vsix) as z:
        names = set(z.namelist())
        manifest = json.loads(z.read("extension/package.json"))
        bundle = z.read("extension/dist/extension.js").decode()
    assert "extension/dist/extension.js" in names
    # Sources, tests and node_modules stay out: everything is in the bundle.
    assert not [n for n in names if n.startswith(("extension/src/", "extension/node_modules/", "extension/test/"))], (
        names
    )
    assert manifest["main"] == "./dist/extension.js"
    assert manifest["capabilities"]["untrustedWorkspaces"]["supported"] is False
    assert manifest["capabilities"]["untrustedWorkspaces"]["description"]
    assert set(manifest["activationEvents"]) == {
        "onLanguage:python",
        "onNotebook:jupyter-notebook",
        "workspaceContains:**/pyproject.toml",
    }
    commands = {c["command"] for c in manifest["contributes"]["commands"]}
    assert commands == {
        "exportlens.reexport",
        "exportlens.showGraph",
        "exportlens.graph",
        "exportlens.showLineNodes",
        "exportlens.showGraphPicture",
        "exportlens.clearCache",
        "exportlens.restart",
        "exportlens.showOutput",
    }
    # The language client is bundled (no runtime dependency on node_modules).
    assert "vscode-languageclient" in bundle or "LanguageClient" in bundle


def _setup_code_server() -> dict[str, str]:
    proc = _run(["bash", str(EXTENSION / "scripts" / "setup-code-server.sh")], ROOT, timeout=3000)
    assert proc.returncode == 0, _tail(proc)
    kit = dict(line.split("=", 1) for line in proc.stdout.strip().splitlines() if "=" in line)
    for key in ("NODE", "CODE_SERVER", "PLAYWRIGHT_CORE", "CHROMIUM"):
        assert key in kit and Path(kit[key]).exists(), (key, proc.stdout)
    return kit


def _expected_problems() -> list[dict[str, Any]]:
    """What ``exportlens check`` reports for the model files: the editor must show the same."""
    code, report = check_json(*(f"examples/{name}" for name in MODEL_FILES))
    assert code == 1, report  # data_dependent.py fails to export
    expected = [
        {"file": Path(f["path"]).name, "code": d["code"], "line": d["line"], "severity": d["severity"]}
        for f in report["files"]
        for d in f["diagnostics"]
    ]
    # The cases this test is about, so a change in the examples cannot hollow it out.
    for must in (
        {"file": "data_dependent.py", "code": "data-dependent", "line": 10, "severity": "error"},
        {"file": "data_dependent.py", "code": "data-dependent", "line": 12, "severity": "error"},
        {"file": "counter.py", "code": "mutation/buffer", "line": 14, "severity": "information"},
    ):
        assert must in expected, (must, expected)
    return expected


def _expected_status_bar(expected: list[dict[str, Any]]) -> dict[str, str]:
    """The status item's text per file: "exportlens" (exported) or "exportlens: N errors"."""
    errors = {name: sum(1 for p in expected if p["file"] == name and p["severity"] == "error") for name in MODEL_FILES}
    return {name: f"exportlens: {n} error{'s' if n != 1 else ''}" if n else "exportlens" for name, n in errors.items()}


# What the extension sends for settings the user left alone (see editors/vscode/src/settings.ts).
UNSET = {
    "debounceMs": None,
    "timeout": None,
    "memoryMb": None,
    "workers": None,
    "cacheDir": None,
    "cacheUrl": None,
    "cacheWrite": None,
    "cache": None,
    "strict": None,
    "lower": None,
    "weights": None,
    "startMethod": None,
    "diagnostics": None,
    "inlayHints": None,
}


def _traced_params(log: str, message: str) -> list[Any]:
    """The params of each traced LSP message (``exportlens.trace.server: verbose``), in order."""
    found = []
    for match in re.finditer(re.escape(message) + r"[^\n]*\n[^\n]*?\bParams: (\{.*?\n\})", log, re.S):
        found.append(json.loads(match.group(1)))
    assert found, f"no traced {message!r} in the exportlens output"
    return found


def _forward_argument(file: Path, name: str) -> tuple[int, int]:
    """1-based line and column of ``name`` in ``def forward(self, name...)``."""
    for number, text in enumerate(file.read_text().splitlines(), start=1):
        match = re.search(rf"def forward\(self, ({name})\b", text)
        if match:
            return number, match.start(1) + 1
    raise AssertionError(f"no forward({name}) in {file}")


@pytest.fixture(scope="module")
def kit() -> dict[str, str]:
    return _setup_code_server()


def _run_e2e(kit: dict[str, str], vsix: Path, name: str, **config: Any) -> dict[str, Any]:
    """Run test/e2e/run.mjs with artifacts under ``artifacts/<name>``; its JSON result."""
    artifacts = ARTIFACTS / name
    if artifacts.exists():
        shutil.rmtree(artifacts)
    full = {
        "node": kit["NODE"],
        "codeServer": kit["CODE_SERVER"],
        "playwrightCore": kit["PLAYWRIGHT_CORE"],
        "chromium": kit["CHROMIUM"],
        "vsix": str(vsix),
        "python": str(VENV_PYTHON),
        "workspaceFiles": [str(EXAMPLES / n) for n in MODEL_FILES] + [str(EXAMPLES / "pyproject.toml")],
        "artifacts": str(artifacts),
        "timeoutMs": 240_000,
        **config,
    }
    # An empty trust record, not the session's (tests/conftest.py): what exports here is
    # trusted by VS Code's Workspace Trust alone, which the extension passes to the server
    # (issue 36: VS Code users get no second question).
    untrusting = artifacts / "config"
    untrusting.mkdir(parents=True, mode=0o700)
    env = dict(os.environ, EXPORTLENS_E2E=json.dumps(full), EXPORTLENS_CONFIG_DIR=str(untrusting))
    proc = _run([kit["NODE"], str(EXTENSION / "test" / "e2e" / "run.mjs")], EXTENSION, timeout=1800, env=env)
    lines = proc.stdout.strip().splitlines()
    assert lines, _tail(proc)
    result: dict[str, Any] = json.loads(lines[-1])
    assert result["ok"] and proc.returncode == 0, (
        f"{result['error']}\nsteps: {result['steps']}\nthe workbench at the failure: {result.get('ui')}\n"
        f"exportlens output (end):\n{result['output'][-3000:]}\n"
        f"stderr:\n{proc.stderr[-3000:]}\nscreenshots: {result['screenshots']}"
    )
    return result


@pytest.mark.timeout(3600)  # a cold machine installs and builds code-server first (minutes)
def test_real_editor_shows_diagnostics_and_hover(kit: dict[str, str], vsix: Path) -> None:
    assert VENV_PYTHON.exists(), "run scripts/setup first"
    expected = _expected_problems()
    line, column = _forward_argument(EXAMPLES / "counter.py", "x")
    status_bar = _expected_status_bar(expected)
    result = _run_e2e(
        kit,
        vsix,
        "full",
        mode="full",
        expectProblems=expected,
        hover={"file": "counter.py", "line": line, "column": column, "expect": "USER_INPUT"},
        statusBar=status_bar,
        graph={"file": "counter.py", "expect": ["# Counter", "aten."]},
        settingsChange={
            "settings": {"exportlens.diagnostics": ["mutation/buffer"], "exportlens.workers": 1},
            "gone": {"code": "mutation/buffer"},
            "kept": [p for p in expected if p["code"] == "data-dependent"],
        },
    )

    # What the page showed, checked again here against the CLI's report.
    for problem in expected:
        rows = [r for r in result["problems"] if problem["code"] in r and f"[Ln {problem['line']}, Col " in r]
        assert rows, (problem, result["problems"])
    assert "USER_INPUT" in result["hover"], result["hover"]
    assert re.search(r"\bx\b", result["hover"]), result["hover"]
    # No second question after VS Code's own: no notice, no message naming the command.
    assert not [r for r in result["problems"] if "untrusted-folder" in r], result["problems"]
    assert "exportlens trust" not in result["output"], result["output"][-4000:]
    assert result["statusBar"] == status_bar, result["statusBar"]
    assert "# Counter" in result["graph"], result["graph"]
    # The wire object, read from the LSP trace: every key present, null where unset.
    init = _traced_params(result["output"], "Sending request 'initialize")[0]["initializationOptions"]
    # ``trusted``: VS Code's Workspace Trust, the only trust this run has (its trust
    # record is empty, ``_run_e2e``), and the problems above were exported with it.
    assert init == {"exportlens": {**UNSET, "cacheDir": init["exportlens"]["cacheDir"]}, "trusted": True}, init
    assert init["exportlens"]["cacheDir"], init  # the test profile sets its own cache folder
    last_change = _traced_params(result["output"], "Sending notification 'workspace/didChangeConfiguration'")[-1]
    assert last_change == {
        "settings": {
            "exportlens": {
                **UNSET,
                "cacheDir": init["exportlens"]["cacheDir"],
                "workers": 1,
                "diagnostics": {"mutation/buffer": False},
            }
        }
    }, last_change
    # Every settings problem the server reports reaches the output channel: the wire
    # object this extension sends must be one the server accepts as it is.
    settings_problems = [
        line
        for line in result["output"].splitlines()
        if re.search(r"exportlens\.\w+.*(unknown setting|expected )", line)
    ]
    assert not settings_problems, settings_problems
    shots = {Path(p).name for p in result["screenshots"]}
    assert {"vscode-problems.png", "vscode-hover.png", "vscode-graph.png"} <= shots, shots

    if os.environ.get("EXPORTLENS_UPDATE_DOCS_IMAGES") == "1":
        images = ROOT / "docs" / "images"
        images.mkdir(parents=True, exist_ok=True)
        for name in ("vscode-problems.png", "vscode-hover.png"):
            shutil.copyfile(ARTIFACTS / "full" / name, images / name)


@pytest.mark.timeout(3600)
def test_real_editor_explains_a_missing_exportlens(kit: dict[str, str], vsix: Path, tmp_path: Path) -> None:
    """An interpreter without exportlens: an error with the fix, not a crashing client."""
    python = tmp_path / "python-without-exportlens"
    # -I: no PYTHONPATH, no user site, so the repo's exportlens is out of its reach.
    python.write_text('#!/bin/sh\nexec /usr/bin/python3 -I "$@"\n')
    python.chmod(0o755)
    result = _run_e2e(kit, vsix, "not-installed", mode="not-installed", python=str(python))
    assert f'exportlens is not installed in "{python}"' in result["notification"], result["notification"]
    assert f"{python} -m pip install exportlens" in result["notification"], result["notification"]
    assert "exportlens.interpreter" in result["notification"], result["notification"]
    assert result["statusBar"] == {"not-installed": "exportlens: not running"}, result["statusBar"]


FEATURES = Path(__file__).resolve().parent / "workspaces" / "features"


def _line_of(file: Path, code: str) -> int:
    """1-based line of the first line holding ``code``."""
    for number, text in enumerate(file.read_text().splitlines(), start=1):
        if code in text:
            return number
    raise AssertionError(f"no {code!r} in {file}")


@pytest.mark.timeout(3600)
def test_real_editor_shows_hints_lenses_graph_links_and_applies_a_quick_fix(kit: dict[str, str], vsix: Path) -> None:
    """Issue 12 in the real editor, on a model whose classes live in another module.

    net.py declares ``model = Block()``; Block's code is in layers.py. Opening layers.py
    must show the dtype/shape hint (with the user's Dim name) after its forward line and
    the target's lenses on its class line; the status lens re-exports when clicked, "Show
    graph" opens the view whose ``layers.py:LINE`` jumps (Ctrl+click and F12) to that
    line; "Show Nodes of This Line" shows what a line became; a quick fix chosen in the
    Quick Fix menu removes its diagnostic once the file is exported again.
    """
    assert VENV_PYTHON.exists(), "run scripts/setup first"
    layers = FEATURES / "layers.py"
    proj_line = _line_of(layers, "h = self.proj(x)")
    mutation_line = _line_of(FEATURES / "running_mean.py", "self.mean = 0.9")
    features = {
        "target": {"file": "net.py", "lenses": ["✓ Block exported", "Show graph"]},
        "module": {
            "file": "layers.py",
            "hint": {"code": "h = self.proj(x)", "expect": "float32[batch, 16]"},
            "lenses": ["✓ Block exported", "Show graph"],
        },
        "view": {
            "expect": [f"layers.py:{proj_line}", "relu"],
            "linkText": f"layers.py:{proj_line}",
            "file": "layers.py",
            "line": proj_line,
        },
        "lineNodes": {"line": proj_line, "expect": ["linear", f"layers.py:{proj_line}"]},
        "quickFix": {
            "file": "running_mean.py",
            "code": "banned-mutation/tensor-attribute",
            "line": mutation_line,
            "column": 9,
            "title": "as a buffer in",
        },
    }
    result = _run_e2e(
        kit,
        vsix,
        "features",
        mode="features",
        features=features,
        workspaceFiles=[str(FEATURES / n) for n in ("net.py", "layers.py", "running_mean.py")],
    )

    # The hint follows the code on its line, named after the user's Dim, not torch's s77.
    hinted = result["hints"]["layers.py"]
    assert hinted.index("float32[batch, 16]") > hinted.index("h = self.proj(x)"), hinted
    assert "s77" not in hinted, hinted
    assert any(t.startswith("✓ Block exported") for t in result["lenses"]["net.py"]), result["lenses"]
    assert any(t.startswith("✓ Block exported") for t in result["lenses"]["layers.py"]), result["lenses"]
    # The status lens re-exported the file it stands in, and the server answered.
    (reexport,) = result["lensCommands"]
    assert reexport["command"] == "exportlens.reexport" and reexport["answered"] and not reexport["failed"], reexport
    assert reexport["arguments"][0].endswith("/layers.py") or reexport["arguments"][0].endswith("/net.py"), reexport
    assert f"layers.py:{proj_line}" in result["graph"], result["graph"]
    assert [j["how"] for j in result["jumps"]] == ["Ctrl+click", "F12"], result["jumps"]
    assert all(j["where"].startswith(f"Ln {proj_line},") for j in result["jumps"]), result["jumps"]
    assert "linear" in result["lineNodes"] and "relu" not in result["lineNodes"], result["lineNodes"]
    # exportlens.inlayHints false reached the running server, which dropped the hints.
    assert result["hintsOff"].strip() == "h = self.proj(x)", result["hintsOff"]
    last_change = _traced_params(result["output"], "Sending notification 'workspace/didChangeConfiguration'")[-1]
    assert last_change["settings"]["exportlens"]["inlayHints"] is False, last_change
    assert any("as a buffer in" in t for t in result["quickFixes"]), result["quickFixes"]
    assert not any("banned-mutation/tensor-attribute" in r for r in result["problemsAfterFix"]), result[
        "problemsAfterFix"
    ]
    shots = {Path(p).name for p in result["screenshots"]}
    assert {"vscode-inlay-hints.png", "vscode-graph-view.png", "vscode-quick-fix.png"} <= shots, shots

    if os.environ.get("EXPORTLENS_UPDATE_DOCS_IMAGES") == "1":
        images = ROOT / "docs" / "images"
        images.mkdir(parents=True, exist_ok=True)
        for name in ("vscode-inlay-hints.png", "vscode-quick-fix.png", "vscode-graph-view.png"):
            shutil.copyfile(ARTIFACTS / "features" / name, images / name)


@pytest.mark.timeout(3600)
def test_real_editor_shows_the_graph_picture_and_a_selected_node_shows_its_line(
    kit: dict[str, str], vsix: Path
) -> None:
    """Issue 31 in the real editor: "Show Graph as a Picture" on net.py opens a webview
    beside the code framing the server's Model Explorer page (through code-server's port
    proxy), which draws the graph view -- not the model-selection page -- and selecting
    the ``aten.linear`` node there shows its line of layers.py, the module the code is in.
    The cursor on another line of layers.py selects that line's node in the picture; an
    edit saved there redraws the picture with the new graph, its layers still expanded
    and its node still selected.
    """
    pytest.importorskip("model_explorer")
    assert VENV_PYTHON.exists(), "run scripts/setup first"
    proj_line = _line_of(FEATURES / "layers.py", "h = self.proj(x)")
    relu_line = _line_of(FEATURES / "layers.py", "return torch.relu(h)")
    result = _run_e2e(
        kit,
        vsix,
        "picture",
        mode="picture",
        picture={
            "file": "net.py",
            "lenses": ["✓ Block exported"],
            "node": {"label": "aten.linear", "file": "layers.py", "line": proj_line},
            "cursor": {"line": relu_line, "node": "relu"},
            "edit": {"append": ".sin()", "label": "aten.sin"},
        },
        workspaceFiles=[str(FEATURES / n) for n in ("net.py", "layers.py")],
    )
    shown = result["picture"]
    # Beside the code: the source's group and the webview's.
    assert shown["groups"] >= 2, shown
    # The webview framed the server's page through code-server (not 127.0.0.1 of the server's own port).
    assert re.search(r"/proxy/\d+/[\w-]+/\d+/", shown["src"]), shown["src"]
    # The graph view, with the model's node count, not the model-selection page.
    assert re.search(r"op node count", shown["text"], re.I), shown["text"]
    assert "Select models" not in shown["text"], shown["text"]
    # Not blank: a drawn graph has many colours (a blank or one-colour frame has a handful).
    assert shown["colours"] > 50, shown
    assert shown["jump"]["tab"].startswith("layers.py") and shown["jump"]["where"].startswith(f"Ln {proj_line},"), shown
    # The cursor on the relu line selected relu in the picture; the editor stayed on that line.
    # relu, and the output whose value that line returns; the first is selected
    assert shown["cursor"] == {"nodes": ["relu", "output"], "selected": "relu"}, shown["cursor"]
    assert shown["cursorStays"]["tab"].startswith("layers.py"), shown["cursorStays"]
    assert shown["cursorStays"]["where"].startswith(f"Ln {relu_line},"), shown["cursorStays"]
    # The edit saved: the picture reloaded with the new node, keeping its expanded layers and selection.
    assert "aten.sin" in shown["labelsAfter"], shown["labelsAfter"]
    before, after = shown["uiStateBefore"], shown["uiStateAfter"]
    assert before["selectedNodeId"] == "relu" and before["deepestExpandedGroupNodeIds"], before
    assert after["selectedNodeId"] == "relu", after
    assert after["deepestExpandedGroupNodeIds"] == before["deepestExpandedGroupNodeIds"], (before, after)
    shots = {Path(p).name for p in result["screenshots"]}
    assert {
        "vscode-graph-picture.png",
        "vscode-graph-picture-jump.png",
        "vscode-graph-picture-cursor.png",
        "vscode-graph-picture-refreshed.png",
    } <= shots, shots
