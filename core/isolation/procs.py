"""A job process seen from the worker: its memory, waiting for its end, and stopping it (with a stack dump first).

A job is known by its pid. A forked job, or one started with ``os.posix_spawn``, is a
child that ``os.waitpid`` waits on. One started with ``subprocess.Popen`` (where there is
no posix_spawn: Windows, ``EXPORTLENS_SUPERVISION=portable``; ``spawning``) is waited on
through its ``Popen``, kept here by pid (``adopt``): on Windows a pid is no child to
``os.waitpid``. ``exit_code`` and ``reap`` take either.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable

import psutil

from exportlens.core.isolation import capabilities, reaper
from exportlens.core.isolation.jobprocess import DUMP_SIGNAL

DUMP_GRACE_S = 0.2  # the stack dump is written synchronously by a signal handler
# The jobs started with ``subprocess.Popen``, by pid, until they are reaped.
_started: dict[int, subprocess.Popen[bytes]] = {}


def adopt(process: subprocess.Popen[bytes]) -> int:
    """Wait on and reap the job ``process`` through its ``Popen`` from now on; its pid."""
    _started[process.pid] = process
    return process.pid


def exit_code(pid: int) -> int | None:
    """The job's exit code once it has ended (reaped now; negative: the signal that
    ended it, as ``subprocess`` says), None while it runs. ChildProcessError when it is
    no child of ours (reaped before)."""
    process = _started.get(pid)
    if process is not None:
        code = process.poll()
        if code is not None:
            del _started[pid]
        return code
    if not capabilities.WAITPID:
        raise ChildProcessError(f"no job {pid} to wait for")
    done, status = os.waitpid(pid, os.WNOHANG)
    return os.waitstatus_to_exitcode(status) if done else None


def reap(pid: int) -> None:
    """Wait for the killed job to end; nothing if it was reaped before."""
    process = _started.pop(pid, None)
    if process is not None:
        process.wait()
    elif capabilities.WAITPID:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


def rss_kb(pid: int) -> int:
    """Resident set of pid plus its descendants (``reaper.descendants``), in kB, from
    psutil on every platform; 0 once pid is gone."""
    total = _rss(pid)
    if total:
        total += sum(_rss(child) for child in _descendants(pid))
    return total // 1024


def _rss(pid: int) -> int:
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


# Where children are found by looking at every process (``reaper.CHILDREN_FILES``:
# macOS, Windows), a job's descendants are looked for this often, not at each
# ``rss_kb``: the look would cost more than the poll; its own memory is read each time.
SCAN_S = 0.5
_scanned: tuple[int, float, set[int]] = (0, 0.0, set())


def _descendants(pid: int) -> set[int]:
    global _scanned
    if reaper.CHILDREN_FILES:
        return reaper.descendants(pid)
    seen, at, found = _scanned
    now = time.monotonic()
    if seen != pid or now - at >= SCAN_S:
        found = reaper.descendants(pid)
        _scanned = (pid, now, found)
    return found


def dump_stack(pid: int) -> None:
    """Ask faulthandler in the job for its stack and give it a moment (the caller kills
    it); nothing where there is no signal to ask with (``capabilities.DUMP_SIGNAL``)."""
    if DUMP_SIGNAL is None:
        return
    try:
        os.kill(pid, DUMP_SIGNAL)
    except ProcessLookupError:
        return
    end = time.monotonic() + DUMP_GRACE_S
    while time.monotonic() < end:
        if exit_code(pid) is not None:
            return
        time.sleep(0.01)
    # The dump is written from the signal handler, synchronously: 200 ms is plenty.


def signal_group(pid: int, platform: str = sys.platform, run: Callable[..., Any] = subprocess.run) -> None:
    """SIGKILL the job's process group (and the job, should it not lead one yet);
    it still needs reaping. Where no subreaper is handed what the job started outside
    its group (no prctl: macOS), its descendants psutil finds now are killed first
    (``reaper.kill_descendants``). Windows has neither SIGKILL nor process
    groups: there ``taskkill /F /T`` ends the job and every process it started, by
    those links (``run`` runs it; a test passes its own)."""
    if platform.startswith("win"):
        run(["taskkill", "/F", "/T", "/PID", str(pid)], capture_output=True, check=False, timeout=30)
        return
    if not capabilities.PRCTL:
        reaper.kill_descendants(pid)
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_group(pid: int) -> None:
    """SIGKILL the job's process group and reap the job."""
    signal_group(pid)
    reap(pid)
