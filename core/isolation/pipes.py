"""Reading the job's pipes without blocking: framed events and a bounded output tail."""

from __future__ import annotations

import os
from typing import Any, Callable

from exportlens.core.isolation.messages import HEADER

OUTPUT_TAIL = 4096  # bytes of model output kept per request


class FrameBuffer:
    """Frames from a non-blocking fd: bytes in, complete msgpack maps out."""

    def __init__(self) -> None:
        self.data = bytearray()

    def feed(self, chunk: bytes) -> list[Any]:
        import msgpack

        self.data += chunk
        out = []
        n = HEADER.size
        while len(self.data) >= n:
            (size,) = HEADER.unpack_from(self.data)
            if len(self.data) < n + size:
                break
            payload = bytes(self.data[n : n + size])
            del self.data[: n + size]
            out.append(msgpack.unpackb(payload, raw=False, strict_map_key=False))
        return out


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
