"""A job process seen from the worker: its memory, and stopping it (with a stack dump first)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable

from exportlens.core.isolation.capabilities import proc_listdir, proc_open
from exportlens.core.isolation.jobprocess import DUMP_SIGNAL

DUMP_GRACE_S = 0.2  # the stack dump is written synchronously by a signal handler

def rss_kb(pid: int, depth: int = 0) -> int:
    """Resident set of pid plus its descendants, in kB (0 once it is gone, and
    always where there is no /proc: ``capabilities``, no memory cap there)."""
    total = 0
    try:
        with proc_open(f"{pid}/status") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    total = int(line.split()[1])
                    break
        if depth < 4:
            for task in proc_listdir(f"{pid}/task"):
                with proc_open(f"{pid}/task/{task}/children") as f:
                    for child in f.read().split():
                        total += rss_kb(int(child), depth + 1)
    except (OSError, ValueError):
        pass
    return total


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


def signal_group(pid: int, platform: str = sys.platform, run: Callable[..., Any] = subprocess.run) -> None:
    """SIGKILL the job's process group (and the job, should it not lead one yet);
    it still needs reaping. Windows has neither SIGKILL nor process groups: there
    ``taskkill /F /T`` ends the job and every process it started, by their parent
    links (``run`` runs it; a test passes its own)."""
    if platform.startswith("win"):
        run(["taskkill", "/F", "/T", "/PID", str(pid)], capture_output=True, check=False, timeout=30)
        return
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_group(pid: int) -> None:
    """SIGKILL the job's process group and reap the job."""
    signal_group(pid)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
