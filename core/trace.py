"""Timestamps of a request's path through the worker and its job, for profiling.

Why: where the worker's time goes between a request and its result (fork, warm-up,
the eager run, extraction, serialization, IPC) cannot be guessed from outside; the
zygote, the standby and the job are three processes. With ``EXPORTLENS_TRACE`` set
to a file path, each of them appends one line per step to that file::

    <CLOCK_MONOTONIC seconds> <pid> <what>

The monotonic clock is the same in every process of the machine, so the lines of
the three processes sort into one timeline (``bench/bench_server.py`` prints the
split from them). Unset (the default), ``mark`` is one global lookup. Each line is
one ``O_APPEND`` write, so concurrent writers never interleave within a line; the
file is opened per line so that it is never an fd a job inherits or a model sees.
"""

from __future__ import annotations

import os
import time

PATH = os.environ.get("EXPORTLENS_TRACE") or None


def mark(what: str) -> None:
    """Note that ``what`` happens now (nothing when tracing is off)."""
    if PATH is None:
        return
    line = f"{time.monotonic():.6f} {os.getpid()} {what}\n".encode()
    try:
        fd = os.open(PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return
    try:
        os.write(fd, line)
    except OSError:
        pass
    finally:
        os.close(fd)


def read(path: str) -> list[tuple[float, int, str]]:
    """The lines of a trace file, in time order."""
    out = []
    with open(path) as f:
        for line in f:
            at, pid, what = line.rstrip("\n").split(" ", 2)
            out.append((float(at), int(pid), what))
    return sorted(out)
