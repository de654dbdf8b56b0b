"""Waiting on pipes: ``select`` where the platform has it for pipes, else polling non-blocking reads.

The worker waits on its protocol input, its signal wake-up pipe and the running job's
events and output; the pool waits on its workers' outputs. Windows's ``select`` takes
sockets only, so there (and with ``EXPORTLENS_SUPERVISION=portable``, ``capabilities``)
a ``PollWaiter`` tries a non-blocking read of each pipe in turn and, when none had
anything, sleeps a moment (1 ms, doubling up to ``MAX_PAUSE_S``) before it tries again.
What such a read got is held for the caller's next ``read`` of that pipe: while a
pipe is registered, its reader reads it through the waiter, never the fd itself.

Why polling and not a reader thread per pipe: a thread blocked in a read cannot be
woken when the worker is done with a pipe that a stray process still holds open, and
it would take the output that the worker drains after killing the job; a poll's read
never outlives its call, so the pipes' lifetimes stay what they are with select.
The cost: up to ``MAX_PAUSE_S`` more before an event is seen, and a few dozen wake-ups
a second while waiting. Non-blocking pipes on Windows need Python 3.12 (``os.set_blocking``).
Torch-free.
"""

from __future__ import annotations

import os
import select
import selectors
import time
from typing import Any, Callable, Protocol

from exportlens.core.isolation import capabilities
from exportlens.core.isolation.pipes import drain

CHUNK = 1 << 16
FIRST_PAUSE_S = 0.001
MAX_PAUSE_S = 0.02
ALL = 1 << 30


class Waiter(Protocol):
    """Pipes registered with a key; ``wait`` names the keys of those with something
    to read (data, or their end); ``read`` reads like ``pipes.drain``."""

    def add(self, fd: int, key: Any) -> None: ...

    def remove(self, fd: int) -> list[bytes]: ...

    def wait(self, timeout: float | None) -> list[Any]: ...

    def read(self, fd: int, sink: Callable[[bytes], Any], max_chunks: int = ALL) -> bool: ...

    def close(self) -> None: ...


class SelectWaiter:
    """POSIX: the kernel says which pipe is readable."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()

    def add(self, fd: int, key: Any) -> None:
        self.selector.register(fd, selectors.EVENT_READ, key)

    def remove(self, fd: int) -> list[bytes]:
        """Stop waiting on ``fd``; what was read from it and not taken (never, here)."""
        try:
            self.selector.unregister(fd)
        except (KeyError, ValueError):
            pass
        return []

    def wait(self, timeout: float | None) -> list[Any]:
        return [key.data for key, _ in self.selector.select(timeout)]

    def read(self, fd: int, sink: Callable[[bytes], Any], max_chunks: int = ALL) -> bool:
        """What ``fd`` has now (at most ``max_chunks`` reads; one for a blocking fd
        that ``wait`` named); False at its end."""
        return drain(fd, sink, max_chunks)

    def close(self) -> None:
        self.selector.close()


class PollWaiter:
    """Anywhere pipes can be read without blocking: try each, sleep, try again."""

    def __init__(self) -> None:
        self.keys: dict[int, Any] = {}
        self.held: dict[int, list[bytes]] = {}  # read by ``wait``, not yet by the caller
        self.ended: set[int] = set()

    def add(self, fd: int, key: Any) -> None:
        os.set_blocking(fd, False)
        self.keys[fd] = key
        self.held[fd] = []

    def remove(self, fd: int) -> list[bytes]:
        self.keys.pop(fd, None)
        self.ended.discard(fd)
        return self.held.pop(fd, [])

    def _look(self, fd: int) -> bool:
        if self.held[fd] or fd in self.ended:
            return True
        try:
            chunk = os.read(fd, CHUNK)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if chunk:
            self.held[fd].append(chunk)
        else:
            self.ended.add(fd)
        return True

    def wait(self, timeout: float | None) -> list[Any]:
        end = None if timeout is None else time.monotonic() + timeout
        pause = FIRST_PAUSE_S
        while True:
            ready = [key for fd, key in list(self.keys.items()) if self._look(fd)]
            now = time.monotonic()
            if ready or (end is not None and now >= end):
                return ready
            time.sleep(pause if end is None else min(pause, end - now))
            pause = min(pause * 2, MAX_PAUSE_S)

    def read(self, fd: int, sink: Callable[[bytes], Any], max_chunks: int = ALL) -> bool:
        held = self.held.get(fd)
        if held:
            for chunk in held:
                sink(chunk)
            max_chunks -= len(held)
            held.clear()
        if fd in self.ended:
            return False
        return drain(fd, sink, max_chunks) if max_chunks > 0 else True

    def close(self) -> None:
        self.keys.clear()
        self.held.clear()
        self.ended.clear()


def make_waiter() -> Waiter:
    """The waiter the platform allows (``capabilities.SELECT_PIPES``)."""
    return SelectWaiter() if capabilities.SELECT_PIPES else PollWaiter()


def read_within(fd: int, wait_s: float) -> bytes | None:
    """What the non-blocking ``fd`` has within ``wait_s`` (b"" at its end), None if nothing came."""
    end = time.monotonic() + wait_s
    pause = FIRST_PAUSE_S
    while True:
        try:
            return os.read(fd, 4096)
        except BlockingIOError:
            pass
        now = time.monotonic()
        if now >= end:
            return None
        if capabilities.SELECT_PIPES:
            select.select([fd], [], [], end - now)
        else:
            time.sleep(min(pause, end - now))
            pause = min(pause * 2, MAX_PAUSE_S)
