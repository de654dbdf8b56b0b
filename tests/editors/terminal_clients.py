"""What the Emacs (eglot) and Vim (ALE) tests share: the editors from Debian's
packages, the project they open, what the CLI says about it, the probe each editor
runs, and the processes left after it exits.

Each editor runs its real terminal UI on a pty (``terminal.Terminal``) and is typed
into as a user types. A small probe loaded after the user's configuration
(``emacs/probe.el``, ``vim/probe.vim``) writes what the editor holds -- each Python
buffer's diagnostics and text, the documentation shown, the messages -- as JSON to a
file whenever it changes, and then sets the terminal's title to the new sequence
number: the title change is the event the test waits on, never a sleep.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.conftest import EXAMPLES, check_json
from tests.editors.terminal import Terminal

SETUP = Path(__file__).resolve().parent / "scripts" / "setup-terminal-editors.sh"
MODELS = ("dynamic_shapes.py", "counter.py")
FIRST_EXPORT_S = 240.0  # the worker's warm-up imports torch on a shared 2-core machine
EXPORT_S = 120.0
EXIT_GRACE_S = 30.0  # how long the server and its workers get after the editor exits
MARK = "EXPORTLENS_TEST_MARK"  # in the editor's environment, so in the server's and workers'
T = TypeVar("T")

# The edits the tests make, and the text they lead to.
FIXED_DIM = 'batch = Dim("batch", min=2, max=64)', "batch = 4"  # the quick fix on dynamic_shapes.py
BRANCH = ("        if x.sum() > 0:", "            x = x * 2")  # typed after counter.py's `def forward`
MARKDOWN_SYNTAX = ("```", "**")  # what a plain-text hover must never show


def editors() -> dict[str, str]:
    """Install (or find) Debian's emacs-nox, elpa-eglot, vim and vim-ale; their paths.
    Skips, with the reason, only where the packages cannot be installed here."""
    proc = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=1800)
    if proc.returncode == 3:
        pytest.skip(f"the terminal editors cannot be installed here: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    kit = dict(line.split("=", 1) for line in proc.stdout.strip().splitlines() if "=" in line)
    for key in ("EMACS", "EGLOT", "VIM", "ALE"):
        assert key in kit and Path(kit[key]).exists(), (key, proc.stdout)
    return kit


def with_branch(text: str) -> str:
    lines = text.split("\n")
    at = next(i for i, line in enumerate(lines) if "def forward(self, x):" in line) + 1
    return "\n".join(lines[:at] + list(BRANCH) + lines[at:])


def new_project(root: Path) -> Path:
    root.mkdir(parents=True)
    for name in (*MODELS, "pyproject.toml"):
        shutil.copy(EXAMPLES / name, root / name)
    return root


def expected_diagnostics(tmp: Path) -> dict[str, list[tuple[int, str]]]:
    """What ``exportlens check`` reports -- (line, code) -- for each text the editors
    show: the two models, dynamic_shapes.py after the quick fix, counter.py with the
    typed branch. One CLI run for all four."""
    variants = {
        "dynamic_shapes.py": (EXAMPLES / "dynamic_shapes.py").read_text(),
        "fixed/dynamic_shapes.py": (EXAMPLES / "dynamic_shapes.py").read_text().replace(*FIXED_DIM),
        "counter.py": (EXAMPLES / "counter.py").read_text(),
        "branched/counter.py": with_branch((EXAMPLES / "counter.py").read_text()),
    }
    for name, text in variants.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    shutil.copy(EXAMPLES / "pyproject.toml", tmp / "pyproject.toml")
    _, report = check_json(*variants, cwd=tmp)
    found = {str(Path(f["path"])): sorted((d["line"], d["code"]) for d in f["diagnostics"]) for f in report["files"]}
    assert sorted(found) == sorted(variants), report
    # What the tests are about, so a change in the examples cannot hollow them out.
    assert found["dynamic_shapes.py"] == [(7, "constraint-violation")], found
    assert found["fixed/dynamic_shapes.py"] == [], found
    assert found["counter.py"] == [(14, "mutation/buffer")], found
    assert found["branched/counter.py"] == [(14, "data-dependent")], found
    return found


def editor_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The editor's environment: a home of its own, the test's cache folder, a mark."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return dict(
        os.environ,
        HOME=str(home),
        TERM="xterm-256color",
        EXPORTLENS_CACHE_DIR=str(tmp / "cache"),
        PYTHONWARNINGS="ignore",
        **{MARK: uuid.uuid4().hex},
        **extra,
    )


class Probe:
    """The editor's state as its probe last wrote it; waits on the title it bumps."""

    def __init__(self, term: Terminal, path: Path) -> None:
        self.term = term
        self.path = path

    def read(self) -> dict[str, Any] | None:
        """The last state (with its ``seq``), or None before the first."""
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # not written yet (the probe writes a file and renames it)
        return dict(raw["state"], seq=raw["seq"])

    def until(self, condition: Callable[[dict[str, Any]], T | None], timeout: float, what: str) -> T:
        """Wait until ``condition(state)`` holds for the editor's state; its value."""

        def check() -> T | None:
            state = self.read()
            return condition(state) if state is not None else None

        try:
            return self.term.wait_until(check, timeout, what)
        except AssertionError as e:
            raise AssertionError(f"{e}\n--- the editor's last state:\n{json.dumps(self.read(), indent=1, ensure_ascii=False)[-6000:]}") from None


def marked(mark: str) -> list[int]:
    """Live processes whose environment holds ``MARK=mark``: the editor's, the
    server's and its workers' (whatever session or process group each made)."""
    needle = f"{MARK}={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2 :].split()[0] != "Z":
            found.append(int(entry.name))
    return found


def describe(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            out.append(f"{pid}: " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip())
        except OSError:
            out.append(f"{pid}: (gone)")
    return out


def leftovers(mark: str, grace: float = EXIT_GRACE_S) -> list[str]:
    """The marked processes still running ``grace`` seconds after the editor exited
    (each waited for through a pidfd: its exit is the event); then killed."""
    import time

    deadline = time.monotonic() + grace
    for pid in marked(mark):
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        finally:
            os.close(fd)
    left = marked(mark)
    described = describe(left)
    for pid in left:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    return described


def lines_and_codes(diagnostics: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return sorted((int(d["line"]), str(d["code"])) for d in diagnostics)
