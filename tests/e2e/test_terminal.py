"""The command on a terminal: the live progress line (only on a terminal, never in a
pipe, a machine format or with --quiet), colour by NO_COLOR/FORCE_COLOR, source
excerpts, --version and --help. The terminal is a real pseudo-terminal (``pty``)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

MODEL = """import torch


class {name}(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros(1))

    def forward(self, x):
        self.steps.add_(1)
        return x * 2


model = {name}()
example_args = (torch.randn(3),)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    for name in ("Alpha", "Beta"):
        (tmp_path / f"{name.lower()}.py").write_text(MODEL.format(name=name))
    return tmp_path


def on_a_terminal(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal and stdout on a pipe; the exit
    code, what the terminal received, and stdout."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))  # 200 columns: the whole line fits
    full_env = dict(os.environ, PYTHONWARNINGS="ignore", TERM="xterm", **(env or {}))
    full_env.pop("NO_COLOR", None)
    full_env.pop("FORCE_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "exportlens", *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=full_env)
    os.close(slave)
    assert proc.stdout is not None
    tty, out = b"", b""
    streams = {master: "tty", proc.stdout.fileno(): "out"}
    while streams:
        ready, _, _ = select.select(list(streams), [], [], 120)
        assert ready, "the command went silent for two minutes"
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                chunk = b""
            if not chunk:
                del streams[fd]
            elif streams[fd] == "tty":
                tty += chunk
            else:
                out += chunk
    os.close(master)
    return proc.wait(timeout=60), tty.decode("utf-8", "replace"), out.decode("utf-8", "replace")


def test_progress_is_drawn_on_a_terminal_and_erased(project: Path) -> None:
    code, tty, out = on_a_terminal("check", "--no-cache", cwd=project)
    assert code == 0, tty
    assert "0/2 files" in tty and "2/2 files" in tty, tty
    assert "exporting Alpha (alpha.py 1/1)" in tty or "exporting Beta (beta.py 1/1)" in tty, tty
    # Each step of a long export is drawn as it begins (a 70B model traces for a while).
    assert "running the file (alpha.py)" in tty or "running the file (beta.py)" in tty, tty
    for phase in ("building the model", "tracing", "decompositions"):
        assert f"{phase} Alpha (alpha.py 1/1)" in tty or f"{phase} Beta (beta.py 1/1)" in tty, (phase, tty)
    assert tty.endswith("\r\x1b[K"), repr(tty[-80:])  # erased at the end: only the report stays
    # The report on stdout holds nothing of it.
    assert "files ·" not in out and "\r" not in out and "\x1b" not in out
    assert "Checked 2 files, 2 targets" in out


def test_cache_hits_are_counted(project: Path) -> None:
    assert run_cli("check", cwd=project).returncode == 0  # fills the cache
    code, tty, _ = on_a_terminal("check", cwd=project)
    assert code == 0 and "2 cached" in tty, tty


@pytest.mark.parametrize("extra", [("--format", "json"), ("--format", "sarif"), ("--format", "github"), ("--quiet",)])
def test_no_progress_for_machines_or_quiet(project: Path, extra: tuple[str, ...]) -> None:
    code, tty, out = on_a_terminal("check", "--no-cache", *extra, cwd=project)
    assert code == 0, tty
    assert "files" not in tty and "\x1b[K" not in tty, tty
    if extra == ("--quiet",):
        assert "Checked" not in out and "mutation/buffer" in out


def test_no_progress_in_a_pipe(project: Path) -> None:
    proc = run_cli("check", "--no-cache", cwd=project)
    assert proc.returncode == 0
    assert "\x1b" not in proc.stderr and "\r" not in proc.stderr and "files ·" not in proc.stderr
    assert "\x1b" not in proc.stdout


def test_snapshot_shows_progress_on_a_terminal(project: Path) -> None:
    code, tty, out = on_a_terminal("snapshot", "--no-cache", cwd=project)
    assert code == 0 and "2/2 files" in tty and "exportlens.snapshot.json: 2 targets recorded" in out


def test_colour_follows_no_color_and_force_color(project: Path) -> None:
    args = ("check", "--quiet", "--no-signatures", "alpha.py")  # the diagnostics alone: the same every run
    plain = run_cli(*args, cwd=project, env={"NO_COLOR": None, "FORCE_COLOR": None})
    forced = run_cli(*args, cwd=project, env={"NO_COLOR": None, "FORCE_COLOR": "1"})
    vetoed = run_cli(*args, cwd=project, env={"NO_COLOR": "1", "FORCE_COLOR": "1"})
    assert "mutation/buffer" in plain.stdout and "\x1b[" not in plain.stdout
    assert "\x1b[1;34minformation[mutation/buffer]:\x1b[0m" in forced.stdout  # information in blue, as the editor shows it
    assert vetoed.stdout == plain.stdout


def test_full_output_underlines_the_span_and_concise_keeps_one_line(tmp_path: Path) -> None:
    (tmp_path / "wide.py").write_text(
        "import torch\n\n\nclass 模型(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        '        self.register_buffer("步数", torch.zeros(1))\n\n    def forward(self, x):\n'
        "        self.步数.add_(1)\n        return x * 2\n\n\nmodel = 模型()\nexample_args = (torch.randn(3),)\n",
        encoding="utf-8",
    )
    full = run_cli("check", "--no-signatures", "wide.py", cwd=tmp_path)
    lines = full.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("wide.py:10:9: information[mutation/buffer]:"))
    assert lines[head + 1 : head + 5] == [
        "   |",
        "10 |         self.步数.add_(1)",
        "   |         " + "^" * 17,  # 步数 takes four cells on a terminal
        "   |",
    ]
    concise = run_cli("check", "--no-signatures", "--output-format", "concise", "wide.py", cwd=tmp_path)
    assert [line for line in concise.stdout.splitlines() if line] == [lines[head], concise.stdout.splitlines()[-1]]


def test_notes_show_the_line_that_specialised_a_dim() -> None:
    proc = run_cli("check", "--no-signatures", "examples/dynamic_shapes.py")
    lines = proc.stdout.splitlines()
    note = next(i for i, line in enumerate(lines) if "= note: examples/dynamic_shapes.py:12: this code specialises" in line)
    assert lines[note + 2].startswith("12 |") and "x.shape[0] == 4" in lines[note + 2]
    assert lines[note + 3] == "   |         " + "^" * len("if x.shape[0] == 4:")


def test_version_without_torch() -> None:
    short = run_cli("--version")
    assert short.returncode == 0 and short.stdout.startswith("exportlens 0.") and "torch 2." in short.stdout
    code = "import sys\nfrom exportlens.cli import run\nassert run(['version']) == 0\nassert 'torch' not in sys.modules, 'version imported torch'\n"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = dict(line.split(None, 1) if not line.startswith(("program", "JSON", "snapshot")) else line.rsplit(None, 1) for line in proc.stdout.splitlines())
    assert rows["torch"].startswith("2.") and rows["Python"].startswith(f"{sys.version_info.major}.{sys.version_info.minor}")
    assert rows["program schema"] == "2.0" and rows["JSON report"] == "1" and rows["snapshot format"] == "1"


def test_help_has_examples() -> None:
    top = run_cli("--help")
    check = run_cli("check", "--help")
    for proc in (top, check):
        assert proc.returncode == 0 and "examples:" in proc.stdout and "exportlens check --watch" in proc.stdout
    assert "--output-format" in check.stdout and "--quiet" in check.stdout
