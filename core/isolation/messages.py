"""Every message between the pool (front end), the warm worker (zygote) and a job
process: one dataclass per event, and the one frame codec both ends use.

This is the only module both sides of a pipe import (with the torch-free results it
carries), so it stays small and depends on nothing but msgpack and ``core.model``
(the request itself, ``ExportRequest``, is ``core/model/request``'s).

A frame is a 4-byte big-endian payload length, then a msgpack map: the message's
fields plus ``"ev"``, its tag. A reader decodes each frame into the dataclass its tag
names, ignoring fields it does not know (a newer writer may add some); anything else
-- an unknown tag, a missing field, a frame over ``MAX_FRAME``, bytes that are not
msgpack -- is a :class:`MessageError`.

Who sends what, in order:

pool -> zygote (the zygote's stdin)
    ``Export``   run this request (queued while a job runs)
    ``Cancel``   kill request ``id``'s job now; a queued one is dropped
    ``Exit``     kill any job and exit
zygote -> pool (the zygote's stdout)
    ``WorkerReady``  once, after importing torch and warming up
    ``JobStarted``   a job process runs request ``id`` (its pid, for tests and tools)
    ``TargetProgress`` request ``id`` begins exporting ``target``, or enters a phase
                     (a job's ``Phase``); also a heartbeat
    ``Finished``     exactly once per request. A cancelled request gets an empty
                     result and ``cancelled=True``; a ``Cancel`` for an id already
                     answered gets no reply.
    ``Preloading``   the worker imports a library module now, while idle: should it
                     die or go silent before its next message, that library is to blame
    ``Preloaded``    the worker stopped importing (done, or a request came): what it
                     holds now, what it refused and why, its memory before and after
    ``Retiring``     the worker exits now and is to be replaced: it holds a library
                     changed on disk since, or one that made it unsafe to fork
job process -> zygote (a pipe per job)
    ``StandbyWarm``   a standby job process is warm and waits for its ``Export``
    ``Phase``         the file's or the target's next step (for progress), at any
                      point: the file's first ("running the file") comes before
                      ``TargetsFound``, a target's between its ``TargetBegins``
                      and its ``TargetDone``
    ``TargetsFound``  after discovery: every target the file declares
    ``TargetBegins``  before each target's export: a crash or hang from here on is
                      this target's, and its timeout starts now
    ``TargetExported`` a target exported and is lowered next: its result, final
                      now (kept if the job dies while lowering)
    ``LoweringState`` how far its lowering came, and what to say if it dies there
                      (before each lowering step that may kill the job)
    ``TargetDone``    a target finished, with its diagnostics (kept if the job dies later)
    ``JobResult``     once: the file's result; the worker answers (``Finished``)
                      without waiting for the lessons, unless the job left a
                      process behind (``Zygote.run_child``)
    then the lessons, which only speed later jobs (``jobprocess._lessons``; the
    pages it copied go to a memfd, not here):
    ``Imported``      the library modules it imported (for the worker to preload)
                      and the preloaded libraries the model used
    ``FakeCache``     when its export added entries to the fake-tensor dispatch
                      cache: the calls that did (``fakecache``)
    ``Taught``        last: it wrote all it will (``supervise.read_lessons``)
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any, BinaryIO, ClassVar, Union, get_args

import msgpack

from exportlens.core.model.events import LoweringState, Phase, TargetBegins, TargetDone, TargetExported, TargetsFound
from exportlens.core.model.plain import WireError, from_plain, to_plain
from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import FileResult

MAX_FRAME = 256 * 1024 * 1024  # a result with every program of a large file fits
HEADER = struct.Struct(">I")


class MessageError(WireError):
    """Bytes on a pipe that are not a message this side understands."""


# ---------------------------------------------------------------- pool -> zygote


@dataclass(frozen=True)
class Export:
    TAG: ClassVar[str] = "export"
    request: ExportRequest
    # zygote -> standby: whether its job reads its pages again to tell which it
    # copied (``hotpages``; no when the file's last job had nothing to tell)
    learn: bool = True
    # pool -> zygote: more requests of the same batch wait behind this one (``check``
    # of many files): the worker imports what earlier jobs imported (``preload``)
    # before it runs this one, as it would while idle, which a batch never is
    more: bool = False


@dataclass(frozen=True)
class Cancel:
    TAG: ClassVar[str] = "cancel"
    id: int


@dataclass(frozen=True)
class Exit:
    TAG: ClassVar[str] = "exit"


# ---------------------------------------------------------------- zygote -> pool


@dataclass(frozen=True)
class WorkerReady:
    TAG: ClassVar[str] = "ready"
    pid: int
    torch: str


@dataclass(frozen=True)
class JobStarted:
    TAG: ClassVar[str] = "started"
    id: int
    pid: int


@dataclass(frozen=True)
class TargetProgress:
    TAG: ClassVar[str] = "progress"
    id: int
    target: str
    index: int | None = None  # 1-based position among the file's targets, when known
    total: int | None = None
    phase: str = ""  # what the job is doing now ("tracing", "lowering: onnx"); "" at a target's start


@dataclass(frozen=True)
class Finished:
    TAG: ClassVar[str] = "finished"
    id: int
    result: FileResult
    cancelled: bool = False


@dataclass(frozen=True)
class Preloading:
    TAG: ClassVar[str] = "preloading"
    module: str
    library: str  # its top-level module, the unit a refusal names
    file: str  # the library's top-level file, and its state (``library_state``)
    state: str


@dataclass(frozen=True)
class Preloaded:
    TAG: ClassVar[str] = "preloaded"
    modules: int  # library modules preloaded
    libraries: tuple[str, ...]  # the preloaded libraries
    refused: tuple[str, ...] = ()  # "name: why", refused by this worker so far
    rss_before_kb: int = 0  # the worker's resident memory before it preloaded anything
    rss_kb: int = 0  # and now


@dataclass(frozen=True)
class Retiring:
    TAG: ClassVar[str] = "retiring"
    reason: str


# ---------------------------------------------------------------- job -> zygote


@dataclass(frozen=True)
class StandbyWarm:
    TAG: ClassVar[str] = "standby"


@dataclass(frozen=True)
class Imported:
    """The library modules a job imported (name and real file, in import order), which
    its worker may preload, and the preloaded libraries the model's code imported."""

    TAG: ClassVar[str] = "imported"
    modules: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    used: tuple[str, ...] = ()


@dataclass(frozen=True)
class FakeCache:
    """The fake-tensor operator calls a job made that added cache entries: questions
    its worker asks again itself, in its own state (``exportlens.core.isolation.speedups.fakecache``:
    plain msgpack data, never objects)."""

    TAG: ClassVar[str] = "fakecache"
    data: bytes = b""


@dataclass(frozen=True)
class JobResult:
    TAG: ClassVar[str] = "result"
    result: FileResult


@dataclass(frozen=True)
class Taught:
    """The job has written all it will after its result: the lessons for its worker
    (``jobprocess._lessons``). Its worker stops waiting for them here, whatever
    process of the model still holds the pipe open."""

    TAG: ClassVar[str] = "taught"


ToWorker = Union[Export, Cancel, Exit]
FromWorker = Union[WorkerReady, JobStarted, TargetProgress, Finished, Preloading, Preloaded, Retiring]
FromJob = Union[
    StandbyWarm,
    TargetsFound,
    TargetBegins,
    Phase,
    TargetExported,
    LoweringState,
    TargetDone,
    Imported,
    FakeCache,
    JobResult,
    Taught,
]
Message = Union[ToWorker, FromWorker, FromJob]

# Every message class, from the unions above: a new message is named once.
_BY_TAG: dict[str, type[Any]] = {cls.TAG: cls for cls in (*get_args(ToWorker), *get_args(FromWorker), *get_args(FromJob))}


# ---------------------------------------------------------------- frames


def encode(message: Message) -> bytes:
    """One frame: header and payload."""
    plain = to_plain(message)
    plain["ev"] = message.TAG
    payload = msgpack.packb(plain, use_bin_type=True)
    return HEADER.pack(len(payload)) + payload


def decode(payload: bytes) -> Message:
    """A frame's payload as its message (raises MessageError)."""
    try:
        plain = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several unrelated types
        raise MessageError(f"undecodable frame: {e}") from e
    if not isinstance(plain, dict):
        raise MessageError(f"a frame is a map, not {type(plain).__name__}")
    tag = plain.pop("ev", None)
    cls = _BY_TAG.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise MessageError(f"unknown message {tag!r}")
    try:
        message: Message = from_plain(cls, plain)
    except (WireError, TypeError, ValueError) as e:
        raise MessageError(f"bad {tag!r} message: {e}") from e
    return message


def frame_size(header: bytes | bytearray) -> int:
    (size,) = HEADER.unpack_from(header)
    if size > MAX_FRAME:
        raise MessageError(f"frame of {size} bytes is over the {MAX_FRAME}-byte limit")
    return int(size)


class FrameDecoder:
    """Frames from a non-blocking pipe: bytes in, complete messages out."""

    def __init__(self) -> None:
        self.data = bytearray()

    def feed(self, chunk: bytes) -> list[Message]:
        self.data += chunk
        out = []
        n = HEADER.size
        while len(self.data) >= n:
            size = frame_size(self.data)
            if len(self.data) < n + size:
                break
            payload = bytes(self.data[n : n + size])
            del self.data[: n + size]
            out.append(decode(payload))
        return out


def write_frame(fd_or_file: int | BinaryIO, message: Message) -> None:
    data = encode(message)
    if isinstance(fd_or_file, int):
        view = memoryview(data)
        while view:
            n = os.write(fd_or_file, view)
            view = view[n:]
    else:
        fd_or_file.write(data)
        fd_or_file.flush()


def read_frame(fd_or_file: int | BinaryIO) -> Message | None:
    """The next message from a blocking fd or file; None at end of stream."""
    header = _read_exact(fd_or_file, HEADER.size)
    if header is None:
        return None
    payload = _read_exact(fd_or_file, frame_size(header))
    if payload is None:
        return None
    return decode(payload)


def _read_exact(fd_or_file: int | BinaryIO, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = os.read(fd_or_file, n) if isinstance(fd_or_file, int) else fd_or_file.read(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
