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
Where there is no ``prctl`` (macOS, Windows; ``capabilities``) none of this is done:
there the job's descendants psutil finds when the job is killed die with it
(``procs.signal_group``), as do those found as it exits (``jobprocess``); what was
orphaned before (a daemon's double fork, a crashed job's children) outlives it.
"""

from __future__ import annotations

import ctypes
import os
import signal
from typing import Collection

import psutil

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


def _children_files(root: str | None) -> bool:
    """Whether the kernel lists each thread's children (``/proc/PID/task/TID/children``,
    ``CONFIG_PROC_CHILDREN``): this process's main thread has the file."""
    return root is not None and os.path.exists(os.path.join(root, "self", "task", str(os.getpid()), "children"))


# Where the kernel lists them, a process's children are read from its own files
# (~20 us); elsewhere psutil finds them by looking at every process's parent (~15 ms
# of /proc on Linux, a sysctl on macOS, a snapshot on Windows).
CHILDREN_FILES = _children_files(capabilities.PROC_ROOT)


def children(pid: int) -> set[int]:
    """The pids of pid's children (zombies included, as the kernel's list and
    psutil's on Linux have them); none once pid is gone."""
    if not CHILDREN_FILES:
        try:
            return {child.pid for child in psutil.Process(pid).children()}
        except psutil.Error:
            return set()
    try:
        tasks = proc_listdir(f"{pid}/task")
    except OSError:
        return set()
    found: set[int] = set()
    for task in tasks:
        try:
            with proc_open(f"{pid}/task/{task}/children") as f:
                found.update(int(child) for child in f.read().split())
        except (OSError, ValueError):
            pass  # the thread just ended
    return found


def descendants(pid: int, generations: int = 4) -> set[int]:
    """The pids of pid's descendants, ``generations`` deep where the kernel lists
    children (each generation a read of their files), all of them where psutil finds
    them (one look at every process)."""
    if not CHILDREN_FILES:
        try:
            return {child.pid for child in psutil.Process(pid).children(recursive=True)}
        except psutil.Error:
            return set()
    found: set[int] = set()
    generation = children(pid)
    for _ in range(generations):
        found |= generation
        generation = {grandchild for child in generation for grandchild in children(child)} - found
    return found


def kill_descendants(pid: int) -> None:
    """SIGKILL pid's descendants psutil finds now, by their parent links (not pid):
    where no subreaper is handed what a job started outside its process group
    (``capabilities.PRCTL``), it dies with the job only if found while the job lives
    (``procs.signal_group``, and the job itself as it exits: ``jobprocess``). Each is
    checked to be the process found, not a pid reused since."""
    try:
        found = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return
    for process in found:
        try:
            process.kill()
        except psutil.Error:
            pass


def kill_strays(keep: Collection[int] = ()) -> int:
    """Kill and reap every child of this process but ``keep``, and every descendant
    that surfaces as a child once its parent is gone; how many were reaped. None (0)
    where this process is no subreaper (no prctl: ``capabilities``), as nothing a job
    started is handed to it: the caller reaps what it killed itself."""
    if not capabilities.PRCTL:
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
