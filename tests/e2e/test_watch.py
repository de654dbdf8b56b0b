"""``exportlens check --watch`` as a user runs it: in its own process group (as a
terminal's foreground job), a save of the module the model imports reported on its
own, then Ctrl-C (SIGINT to the whole group, as the terminal sends it) ends the
command and every worker and job process it started."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.conftest import ROOT, as_a_shell_starts_it

MODEL = """import torch
from helper import scale


class Tiny(torch.nn.Module):
    def forward(self, x):
        return scale(x) + 1


model = Tiny()
example_args = (torch.randn(3),)
"""

CLEAN = "def scale(x):\n    return x * 2\n"
MUTATING = "def scale(x):\n    x.add_(1)\n    return x * 2\n"


class Lines:
    """The command's stdout, line by line, waited on with a deadline (no sleeps)."""

    def __init__(self, stream: object) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def until(self, needle: str, timeout: float = 180) -> list[str]:
        """The lines up to and including the first that contains ``needle``."""
        got: list[str] = []
        while True:
            try:
                line = self._queue.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no {needle!r} within {timeout:g} s; so far: {self.seen}") from None
            assert line is not None, f"the command ended before {needle!r}: {self.seen}"
            got.append(line)
            self.seen.append(line)
            if needle in line:
                return got


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def signal_state(pid: int) -> str:
    """The blocked, ignored and pending signal masks of ``pid``, for a failure message."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return " ".join(line.strip() for line in f if line.startswith(("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")))
    except OSError as e:
        return str(e)


def save(path: Path, text: str) -> None:
    """An editor's atomic save: one rename event. (``write_text`` truncates, then
    writes: under load its events can straddle the watcher's coalescing window, and
    the second round they make -- rightly "unchanged" -- is not the one asserted.)"""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def test_watch_reports_a_dependency_change_and_ctrl_c_stops_every_worker(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "helper.py").write_text(CLEAN)
    (tmp_path / "model.py").write_text(MODEL)
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.Popen(
        [sys.executable, "-m", "exportlens", "check", "--watch", "--no-signatures", "--jobs", "2"],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        preexec_fn=as_a_shell_starts_it,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        lines = Lines(proc.stdout)
        # Read as a terminal would, all along: unread, a full pipe (the workers' logs
        # and warnings go there too) blocks the command's last line, and its exit.
        errors = Lines(proc.stderr)
        first = lines.until("watching for changes")
        assert first[-1].startswith("Checked 1 file, 1 target (1 exported, 0 failed): no diagnostics"), first

        save(tmp_path / "helper.py", MUTATING)  # the module the model imports, not the model
        second = lines.until("watching for changes")
        assert any(line.endswith("helper.py changed: checked 1 file") for line in second), second
        assert any(line.startswith("model.py:7:9: warning[mutation/user-input]:") for line in second), second
        assert second[-1].startswith("Checked 1 file, 1 target (1 exported, 0 failed): 1 warning"), second

        save(tmp_path / "helper.py", CLEAN)  # fixed again: said once, nothing else reprinted
        third = lines.until("watching for changes")
        assert "model.py: no diagnostics now" in third and not any("mutation/" in line for line in third), third

        (tmp_path / "notes.txt").write_text("not python")  # nothing a model depends on: nothing printed
        save(tmp_path / "model.py", MODEL + "\n# a comment\n")
        fourth = lines.until("watching for changes")
        assert any(line.endswith("model.py changed: checked 1 file") for line in fourth), fourth
        assert fourth[-1].startswith("the report is unchanged. Checked 1 file"), fourth

        workers = descendants(proc.pid)
        assert workers, "the workers should be running while it watches"
        before = signal_state(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole foreground group
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"Ctrl-C not answered in 60 s; the command's signals before: {before}; now: {signal_state(proc.pid)}; "
                f"the test process's: {signal_state(os.getpid())}; stderr: {errors.seen}"
            ) from None
        assert code == 130, (code, errors.seen)
        errors.until("stopped watching", timeout=10)  # the pipe is at its end: the reader has it all
        left = [pid for pid in workers if alive(pid)]
        assert not left, f"worker processes left behind: {left}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_watch_refuses_a_machine_format() -> None:
    proc = subprocess.run([sys.executable, "-m", "exportlens", "check", "--watch", "--format", "json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--watch prints the text report" in proc.stderr


# Reads config.json, then waits (bounded) for the test's go-ahead, so that the test
# changes config.json while the first round runs, before any result names it.
READS_THEN_WAITS = """import json
import time
from pathlib import Path

import torch

here = Path(__file__).parent
config = json.loads((here / "config.json").read_text())
(here / "read.flag").write_text("read")
deadline = time.monotonic() + 60
while not (here / "go.flag").exists() and time.monotonic() < deadline:
    time.sleep(0.02)
model = torch.nn.Linear(8, 4)
example_args = (torch.randn(2, config["features"]),)
"""


def test_watch_checks_again_a_file_changed_while_the_round_read_it(tmp_path: Path) -> None:
    """No file event reports that change (the folder was watched, the file was not
    known to matter yet): the round itself finds the file no longer holds what it read."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "config.json").write_text('{"features": 8}')
    (tmp_path / "model.py").write_text(READS_THEN_WAITS)
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.Popen(
        [sys.executable, "-m", "exportlens", "check", "--watch", "--no-signatures", "--jobs", "1", "--no-cache"],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        lines = Lines(proc.stdout)
        Lines(proc.stderr)  # drained, as a terminal would (a full pipe blocks the command)
        flag = tmp_path / "read.flag"
        deadline = time.monotonic() + 180
        while not flag.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the model never read config.json"
            time.sleep(0.02)
        (tmp_path / "config.json").write_text('{"features": 6}')  # the example no longer fits the model
        (tmp_path / "go.flag").write_text("go")
        lines.until("watching for changes")  # the first round: what it read was clean
        second = lines.until("watching for changes")
        assert any(line.endswith("config.json changed: checked 1 file") for line in second), second
        assert "(0 exported, 1 failed)" in second[-1], second
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
