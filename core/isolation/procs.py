"""A job process seen from the worker: its memory, how it ended (and at which line),
stopping it."""

from __future__ import annotations

import os
import re
import signal
import time

from exportlens.core.isolation.jobprocess import DUMP_SIGNAL
from exportlens.core.isolation.messages import ExportRequest

DUMP_GRACE_S = 0.2  # the stack dump is written synchronously by a signal handler

__all__ = ["dump_stack", "exit_text", "kill_group", "locate", "rss_kb"]


def signal_text(sig: int) -> str:
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    desc = signal.strsignal(sig) or ""
    return f"{name} ({desc.lower()})" if desc else name


def rss_kb(pid: int, depth: int = 0) -> int:
    """Resident set of pid plus its descendants, in kB (0 once it is gone)."""
    total = 0
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    total = int(line.split()[1])
                    break
        if depth < 4:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children", "rb") as f:
                    for child in f.read().split():
                        total += rss_kb(int(child), depth + 1)
    except (OSError, ValueError):
        pass
    return total


def exit_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        text = f"with {signal_text(sig)}"
        if sig == signal.SIGKILL:
            text += " (killed from outside, perhaps the system ran out of memory)"
        return text
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    if code == 70:
        return "with exit code 70 (an internal exportlens error; see the output below)"
    return f"with exit code {code} (os._exit or a native library ended the process)"


def dump_stack(pid: int) -> None:
    """Ask faulthandler in the job for its stack, give it a moment, then kill."""
    try:
        os.kill(pid, DUMP_SIGNAL)
    except ProcessLookupError:
        return
    end = time.monotonic() + DUMP_GRACE_S
    while time.monotonic() < end:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return
        time.sleep(0.01)
    # The dump is written from the signal handler, synchronously: 200 ms is plenty.


def kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


_FRAME = re.compile(r'^\s*File "(.*)", line (\d+) in ')


def locate(dump: str, request: ExportRequest) -> int | None:
    """The deepest line of the model file in a faulthandler dump, else of its root."""
    frames = [(m.group(1), int(m.group(2))) for m in map(_FRAME.match, dump.splitlines()) if m]
    path = os.path.realpath(request.path)
    for fname, line in frames:  # most recent call first
        if os.path.realpath(fname) == path:
            return line
    if request.root:
        root = os.path.join(os.path.realpath(request.root), "")
        for fname, line in frames:
            real = os.path.realpath(fname)
            if real.startswith(root) and "site-packages" not in real:
                return line
    return None
