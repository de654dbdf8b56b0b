"""How long a job has taken, for its ``timeout``: the wall clock, less the time it
waited for a CPU.

A job that hoards memory is stopped as ``out-of-memory`` when it passes its cap; a
job that runs too long, as ``timeout``. Both limits race: on a loaded machine (two
cores, other exports, other people's work) a job may get a tenth of a CPU, and a
model that would pass the memory cap in one second of its own running takes ten of
the wall clock -- and was reported as ``timeout``. What the job did is the same
whatever the load, so the answer must be too: the time a job spent runnable but
waiting for a CPU (the kernel's ``run_delay``, ``/proc/PID/schedstat``) is the
machine's, not the export's, and does not count. Time the job spent running, or
blocked on anything else (a sleep, a lock, a pipe, a child), counts as before.

The wall clock still bounds it: after ``WALL_FACTOR`` times the limit a job is out
of time however busy the machine (``pool`` waits that long for a silent worker).
Where the kernel does not say (no ``schedstat``, no ``/proc``: macOS, Windows,
``capabilities``), the wall clock alone counts.
Torch-free.
"""

from __future__ import annotations

from exportlens.core.isolation.capabilities import proc_open

WALL_FACTOR = 10.0
# A spawned job's own time to import torch and warm up (``spawning``) before it says it
# is warm; the request's limit applies from then on (its memory cap throughout).
WARM_UP_S = 180.0


def run_delay_s(pid: int) -> float | None:
    """Seconds the main thread of ``pid`` has waited, runnable, for a CPU; None when
    the kernel does not say (or the process is gone)."""
    try:
        with proc_open(f"{pid}/schedstat") as f:
            fields = f.read().split()
        return int(fields[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def elapsed_s(wall_s: float, delay_s: float | None, delay_at_start_s: float | None) -> float:
    """The job's time from ``wall_s`` of wall clock and its run delay now and when the
    period began (None: unknown, the wall clock counts whole)."""
    if delay_s is None or delay_at_start_s is None:
        return wall_s
    return wall_s - max(0.0, delay_s - delay_at_start_s)


class JobClock:
    """The timeout period of one job; restarted at each target it begins."""

    def __init__(self, pid: int, limit_s: float, now: float) -> None:
        self.pid = pid
        self.limit_s = limit_s
        self.restart(now)

    def restart(self, now: float) -> None:
        self.started = now
        self.delay_at_start = run_delay_s(self.pid)

    def out_of_time(self, now: float) -> bool:
        wall = now - self.started
        if wall <= self.limit_s:
            return False  # cheap: the schedstat is read only once the wall clock is up
        if wall > self.limit_s * WALL_FACTOR:
            return True
        return elapsed_s(wall, run_delay_s(self.pid), self.delay_at_start) > self.limit_s
