"""What the platform offers the worker's supervision, found by asking it, and a switch that withholds it.

Three things the supervision uses are not everywhere:

- ``select`` on pipes: POSIX has it; Windows's ``select`` takes sockets only. Without
  it the worker and the pool wait on their pipes by polling non-blocking reads
  (``waiting``).
- ``/proc``'s Linux-only files: a job's wait for a CPU (its timeout), the threads a
  library started (preloading's check), the pages an export writes (hot pages) and
  each process's children listed by the kernel (a fast look; ``reaper``). Linux has
  them; macOS and Windows do not. Without them each of those degrades as ``describe``
  says; none crashes. A job's resident memory (its memory cap) and its processes are
  psutil's, on every platform.
- Linux's ``prctl``: the worker as a child subreaper (``reaper``) and a job that dies
  with its worker (``PR_SET_PDEATHSIG``, ``jobprocess.die_with``).

And what POSIX has that Windows does not, each a flag here so that no module names it
at import (``tests/core/isolation/test_imports_without_posix.py``):

- ``POSIX_SPAWN``: a spawned job (``spawning``) is started with ``os.posix_spawn``;
  without it, with ``subprocess.Popen``, and waited on and killed through that
  ``Popen`` (``procs.adopt``): on Windows a pid is no child to ``os.waitpid``.
- ``PREAD``: a job's stack dump is read back with ``os.pread``; without it, by seeking.
- ``RESOURCE``: the ``resource`` module (a job's page-fault count, for hot pages).
- ``DUMP_SIGNAL``: ``faulthandler.register`` and ``SIGUSR1``, by which the worker asks a
  job for its stack before killing it for its timeout or its memory; without them a
  hung job is killed with no stack, and its diagnostic points at its target's line.
- ``WAKEUP_PIPE``: a signal (SIGTERM) wakes the worker through a pipe given to
  ``signal.set_wakeup_fd``, which on Windows takes a socket only; without it the worker
  waits in slices and sees the signal's handler at the next (``zygote.SIGNAL_POLL_S``).
- ``PROCESS_GROUPS`` (``os.setpgid``) and ``WAITPID`` (``os.waitpid`` on any child):
  POSIX's; Windows ends a job's tree with ``taskkill`` (``procs.signal_group``).

``EXPORTLENS_SUPERVISION=portable`` withholds select, /proc, prctl and the first five
of those on Linux, so that the paths
macOS and Windows take run here, in the suite (``tests/core/isolation/test_portable.py``,
and the whole suite with the variable set); psutil, which those platforms have too,
stays. ``EXPORTLENS_PROC_ROOT`` points the ``/proc`` reads elsewhere (an empty folder:
a platform without ``/proc``); psutil reads its own. Both are read once, at import:
the pool, the worker and its jobs all inherit them.
Torch-free.
"""

from __future__ import annotations

import faulthandler
import importlib
import os
import signal
import sys
from typing import IO

ENV = "EXPORTLENS_SUPERVISION"
PROC_ENV = "EXPORTLENS_PROC_ROOT"


def portable(env: str | None = None) -> bool:
    """Whether ``$EXPORTLENS_SUPERVISION`` asks for the paths without select, /proc and prctl."""
    value = os.environ.get(ENV, "") if env is None else env
    return value.strip().lower() == "portable"


def find_proc_root(forced_off: bool, root: str | None = None) -> str | None:
    """Where the kernel's process files are (``/proc``, or ``$EXPORTLENS_PROC_ROOT``),
    None where there are none: a folder without ``self`` in it is no ``/proc``."""
    if forced_off:
        return None
    root = (os.environ.get(PROC_ENV) or "/proc") if root is None else root
    return root if os.path.isdir(os.path.join(root, "self")) else None


PORTABLE = portable()
SELECT_PIPES = os.name == "posix" and not PORTABLE
PROC_ROOT = find_proc_root(PORTABLE)
PRCTL = sys.platform.startswith("linux") and not PORTABLE


def importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


POSIX_SPAWN = hasattr(os, "posix_spawn") and not PORTABLE
PREAD = hasattr(os, "pread") and not PORTABLE
RESOURCE = importable("resource") and not PORTABLE  # imported here, so a job's later import costs nothing
DUMP_SIGNAL = hasattr(faulthandler, "register") and hasattr(signal, "SIGUSR1") and not PORTABLE
WAKEUP_PIPE = os.name == "posix" and not PORTABLE
PROCESS_GROUPS = hasattr(os, "setpgid")
WAITPID = hasattr(os, "WNOHANG")


def proc_open(relative: str, buffering: int = -1) -> IO[bytes]:
    """Open ``/proc/<relative>`` to read bytes; FileNotFoundError where there is no
    /proc (every reader already treats an OSError as "the kernel does not say")."""
    if PROC_ROOT is None:
        raise FileNotFoundError(f"no /proc here: {relative}")
    return open(os.path.join(PROC_ROOT, relative), "rb", buffering=buffering)


def proc_text(relative: str, mode: str = "r") -> IO[str]:
    if PROC_ROOT is None:
        raise FileNotFoundError(f"no /proc here: {relative}")
    return open(os.path.join(PROC_ROOT, relative), mode, encoding="utf-8")


def proc_listdir(relative: str = "") -> list[str]:
    if PROC_ROOT is None:
        raise FileNotFoundError(f"no /proc here: {relative}")
    return os.listdir(os.path.join(PROC_ROOT, relative))


def describe() -> list[str]:
    """What the supervision has here and what it does without the rest, one line each:
    for the worker's log and ``exportlens version``."""
    forced = f" (${ENV}=portable)" if PORTABLE else ""
    lines = ["waits on pipes with select" if SELECT_PIPES else f"waits on pipes by polling non-blocking reads, no select on pipes{forced}"]
    lines.append("reads jobs' memory and children with psutil (the memory cap)")
    if PROC_ROOT is not None:
        lines.append(f"reads jobs' CPU wait from {PROC_ROOT}")
    else:
        lines.append(
            f"no /proc{forced}: the timeout counts the wall clock (a job's wait for a CPU is not known),"
            " a job's children are found by looking at every process,"
            " preloading sees only Python's threads a library starts, not native ones"
        )
    without = (
        (PRCTL, "no prctl: orphans of a job go to init, not the worker (what it started outside its process group dies with it only while still its descendant); a job outlives a worker killed with SIGKILL"),
        (POSIX_SPAWN, "no posix_spawn: a spawned job is started, waited on and killed through subprocess.Popen"),
        (DUMP_SIGNAL, "no faulthandler.register or SIGUSR1: a hung job dumps its own stack just before its timeout, not when the worker asks"),
        (WAKEUP_PIPE, "no signal wake-up pipe: a SIGTERM is seen within a slice of the worker's wait"),
        (PREAD, "no os.pread: a job's stack dump is read by seeking"),
        (RESOURCE, "no resource module: a job's page faults are not counted (no hot pages learned)"),
    )
    for present, missing in without:
        if not present:
            what, _, costs = missing.partition(": ")
            lines.append(f"{what}{forced}: {costs}")
    return lines
