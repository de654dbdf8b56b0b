"""Reading a job's pipes without blocking: what is there now, and a bounded tail of its output.

Frames on those pipes are decoded by :class:`exportlens.core.isolation.messages.FrameDecoder`."""

from __future__ import annotations

import os
from typing import Any, Callable

OUTPUT_TAIL = 4096  # bytes of model output kept per request


class Tail:
    """The last ``size`` bytes written to a pipe, however much was written."""

    def __init__(self, size: int = OUTPUT_TAIL) -> None:
        self.size = size
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > 2 * self.size:
            del self.data[: -self.size]

    def text(self) -> str:
        raw = bytes(self.data[-self.size :])
        text = raw.decode("utf-8", errors="replace")
        if len(self.data) > self.size and "\n" in text:
            text = text[text.index("\n") + 1 :]  # start at a whole line
        return text


def drain(fd: int, sink: Callable[[bytes], Any], max_chunks: int = 1 << 30) -> bool:
    """Read what a non-blocking fd has now (up to max_chunks reads); False at EOF."""
    for _ in range(max_chunks):
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not chunk:
            return False
        sink(chunk)
    return True
