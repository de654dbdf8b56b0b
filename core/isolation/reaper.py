"""Jobs leave nothing behind: every process a model starts dies with its job.

Killing the job's process group is not enough. A model (or a library it calls) may
start a process in a new session (``setsid``, ``start_new_session=True``) or
daemonize by double fork; either outlives the group kill -- one more process per
export, still running after the worker is gone. So the zygote makes itself a *child
subreaper* (``PR_SET_CHILD_SUBREAPER``, Linux 3.4): a descendant whose parent dies
is handed to the zygote instead of to init. When a job ends (done, timed out,
crashed, cancelled) and when the worker shuts down, the zygote kills every child of
its own but those it keeps (the standby), generation by generation: killing one
hands its children to the zygote in turn, until none is left.

Only the zygote's own children are ever signalled. A child's pid cannot be reused
until its parent reaps it, so nothing unrelated can be hit, however the descendants
fork, exit or regroup while the zygote looks. No cgroup: that needs a delegated
cgroup tree, which an editor's session rarely has; a subreaper needs no privilege.
What still escapes: processes started by a job when the zygote itself is killed
with SIGKILL (the job dies with it through ``PR_SET_PDEATHSIG``; its orphans go to init).
Where there is no ``prctl`` or no ``/proc`` (macOS, Windows; ``capabilities``) none of
this is done: what a job starts outside its process group outlives it.
"""

from __future__ import annotations

import ctypes
import os
import signal
from typing import Collection

from exportlens.core.isolation import capabilities
from exportlens.core.isolation.capabilities import proc_listdir, proc_open

PR_SET_CHILD_SUBREAPER = 36
# Generations killed at most per call; each round takes a whole generation, so only a
# tree deeper than this (a fork bomb racing the kills) could outlast it.
MAX_ROUNDS = 1000


def become_subreaper() -> bool:
    """Adopt this process's orphaned descendants; False where the kernel cannot
    (no prctl: ``capabilities``)."""
    if not capabilities.PRCTL:
        return False
    try:
        return int(ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def children(pid: int) -> set[int]:
    """The pids of pid's children (zombies included), from /proc (none found where
    there is no /proc: ``capabilities.PROC_ROOT``)."""
    try:
        tasks = proc_listdir(f"{pid}/task")
    except OSError:
        return set()
    found: set[int] = set()
    for task in tasks:
        try:
            with proc_open(f"{pid}/task/{task}/children") as f:
                found.update(int(child) for child in f.read().split())
        except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN
            return _children_by_scan(pid)
        except (OSError, ValueError):
            pass  # the thread just ended
    return found


def _children_by_scan(pid: int) -> set[int]:
    found: set[int] = set()
    try:
        entries = proc_listdir()
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with proc_open(f"{entry}/stat") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(pid).encode():
            found.add(int(entry))
    return found


def kill_strays(keep: Collection[int] = ()) -> int:
    """Kill and reap every child of this process but ``keep``, and every descendant
    that surfaces as a child once its parent is gone; how many were reaped. None (0)
    where there is no /proc to find them by: the caller reaps what it killed itself."""
    if capabilities.PROC_ROOT is None:
        return 0
    me, reaped = os.getpid(), 0
    for _ in range(MAX_ROUNDS):
        strays = children(me).difference(keep)
        if not strays:
            break
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in strays:
            try:
                os.waitpid(pid, 0)  # its children are ours before it can be reaped
                reaped += 1
            except ChildProcessError:
                pass
    return reaped
