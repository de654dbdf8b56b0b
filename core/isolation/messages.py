"""Messages between the front end (CLI, server), the warm worker and a job.

The only module both sides import (with ``results``/``signature``): small,
dependency-free dataclasses. Frames on a pipe are a 4-byte big-endian length then
a msgpack map (``exportlens.core.model.plain``).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import msgpack

from exportlens.core.model.results import FileResult
from exportlens.core.project.settings import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S

MAX_FRAME = 256 * 1024 * 1024
HEADER = struct.Struct(">I")


@dataclass(frozen=True)
class Limits:
    timeout_s: float = DEFAULT_TIMEOUT_S  # per target, wall clock
    memory_mb: int = DEFAULT_MEMORY_MB  # resident set of the job process


@dataclass(frozen=True)
class ExportRequest:
    id: int
    path: str  # absolute path of the model file
    source: str | None = None  # the editor's unsaved text; None reads the file
    root: str | None = None  # project root: pyproject.toml lookup, sys.path
    limits: Limits = field(default_factory=Limits)
    strict_default: bool = False
    skip: tuple[str, ...] = ()  # target names not to export again (after a crash)
    pyproject_targets: tuple[str, ...] = ()  # "path.py:function" entries


# Events a job streams to its worker while it runs, as plain maps:
#   {"ev": "targets", "targets": [TargetDecl...]}   after discovery
#   {"ev": "begin", "target": name}                 before each target's export
#   {"ev": "result", "result": FileResult}          once, last
# Replies the worker sends to the front end:
#   {"ev": "started", "id": id, "pid": pid}        the job process is running
#   {"ev": "result", "id": id, "result": FileResult}
#   {"ev": "ready", "pid": pid, "torch": version}   once, after warm-up


@dataclass(frozen=True)
class Reply:
    id: int
    result: FileResult


def write_frame(fd_or_file: int | BinaryIO, obj: Any) -> None:
    payload = msgpack.packb(obj, use_bin_type=True)
    data = HEADER.pack(len(payload)) + payload
    if isinstance(fd_or_file, int):
        view = memoryview(data)
        while view:
            n = os.write(fd_or_file, view)
            view = view[n:]
    else:
        fd_or_file.write(data)
        fd_or_file.flush()


def _read_exact(fd_or_file: int | BinaryIO, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = os.read(fd_or_file, n) if isinstance(fd_or_file, int) else fd_or_file.read(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd_or_file: int | BinaryIO) -> Any | None:
    """The next message, or None at end of stream. Raises ValueError on garbage."""
    header = _read_exact(fd_or_file, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes is over the limit")
    payload = _read_exact(fd_or_file, size)
    if payload is None:
        return None
    return msgpack.unpackb(payload, raw=False, strict_map_key=False)
