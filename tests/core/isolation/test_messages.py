"""The typed messages between pool, worker and job, and their one frame codec."""

from __future__ import annotations

import dataclasses
import io
import os

import msgpack
import pytest

from exportlens.core.isolation import messages as m
from exportlens.core.isolation.supervise import Attempt, on_event
from exportlens.core.isolation.zygote import Zygote
from exportlens.core.model.lowering import Lowering
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.model.results import Diagnostic, FileResult, TargetDecl, TargetResult
from exportlens.core.model.signature import SourceLine

REQUEST = ExportRequest(7, "/p/model.py", source="x = 1\n", root="/p", limits=Limits(5.0, 512), skip=("A",))
RESULT = FileResult(
    path="/p/model.py",
    diagnostics=(Diagnostic("timeout", "slow", 3, target="A"),),
    targets=(TargetResult("A", 2, "error"),),
)

EVERY_MESSAGE: list[m.Message] = [
    m.Export(REQUEST),
    m.Cancel(7),
    m.Exit(),
    m.WorkerReady(123, "2.13.0"),
    m.JobStarted(7, 456),
    m.TargetProgress(7, "A", 1, 2),
    m.TargetProgress(7, "A"),
    m.TargetProgress(7, "A", 1, 2, "lowering: executorch"),
    m.Finished(7, RESULT),
    m.Finished(7, FileResult(path="/p/model.py"), cancelled=True),
    m.StandbyWarm(),
    m.TargetsFound((TargetDecl("A", 2, "decorator", False), TargetDecl("B", 9, "globals", True))),
    m.TargetBegins("A"),
    m.Phase("A", "lowering: onnx"),
    m.TargetDone(TargetResult("A", 2, "ok", export_ms=1.5), (Diagnostic.at("mutation/buffer", "m", SourceLine(4, 9, 4, 20), "A"),)),
    m.TargetExported(TargetResult("A", 2, "ok", export_ms=1.5), (Diagnostic.at("mutation/buffer", "m", SourceLine(4, 9, 4, 20), "A"),)),
    m.LoweringState(
        "A",
        (Lowering("onnx", "ok"), Lowering("executorch", "error", planned_memory_bytes=1 << 30, workspace_bytes=1 << 33, memory_dims="`h` up to 1024")),
        (Diagnostic.at("lowering/executorch-not-delegated", "n", SourceLine(5), "A"),),
        Diagnostic.at("lowering/executorch-error", "while running", SourceLine(12, 9), "A"),
        True,
    ),
    m.JobResult(RESULT),
    m.Taught(),
]


def payload(plain: object) -> bytes:
    data = msgpack.packb(plain, use_bin_type=True)
    return m.HEADER.pack(len(data)) + data


@pytest.mark.parametrize("message", EVERY_MESSAGE, ids=lambda x: type(x).__name__)
def test_every_message_survives_a_frame(message: m.Message) -> None:
    assert m.FrameDecoder().feed(m.encode(message)) == [message]
    assert m.read_frame(io.BytesIO(m.encode(message))) == message


def test_tags_are_unique_and_every_message_class_is_decodable() -> None:
    classes = {type(x) for x in EVERY_MESSAGE}
    assert len({c.TAG for c in classes}) == len(classes) == 16


def test_frames_arrive_in_pieces_and_together() -> None:
    stream = b"".join(m.encode(x) for x in EVERY_MESSAGE)
    decoder = m.FrameDecoder()
    got: list[m.Message] = []
    for i in range(0, len(stream), 7):  # 7-byte chunks split headers and payloads
        got.extend(decoder.feed(stream[i : i + 7]))
    assert got == EVERY_MESSAGE
    assert decoder.data == bytearray()


def test_a_newer_writers_extra_fields_are_ignored() -> None:
    assert m.FrameDecoder().feed(payload({"ev": "cancel", "id": 3, "reason": "newer"})) == [m.Cancel(3)]


@pytest.mark.parametrize(
    "frame, says",
    [
        (payload({"ev": "launch", "id": 3}), "unknown message 'launch'"),
        (payload({"id": 3}), "unknown message None"),
        (payload([1, 2]), "a frame is a map"),
        (payload({"ev": "cancel"}), "bad 'cancel' message"),
        (payload({"ev": "cancel", "id": "three"}), "bad 'cancel' message"),
        (payload({"ev": "progress", "id": 1, "target": "A", "index": "x"}), "bad 'progress' message"),
        (m.HEADER.pack(3) + b"\xc1\xc1\xc1", "undecodable frame"),
        (m.HEADER.pack(m.MAX_FRAME + 1), "over the"),
    ],
)
def test_garbage_is_one_message_error(frame: bytes, says: str) -> None:
    with pytest.raises(m.MessageError, match=says):
        m.FrameDecoder().feed(frame)
    with pytest.raises(m.MessageError, match=says):
        m.read_frame(io.BytesIO(frame))


def test_end_of_stream_mid_frame_is_none() -> None:
    whole = m.encode(m.Cancel(1))
    assert m.read_frame(io.BytesIO(whole[:-1])) is None
    assert m.read_frame(io.BytesIO(b"")) is None


def test_limits_default_to_the_project_defaults() -> None:
    from exportlens.core.project.settings import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S

    assert Limits() == Limits(DEFAULT_TIMEOUT_S, DEFAULT_MEMORY_MB)
    assert dataclasses.replace(REQUEST).limits.timeout_s == 5.0


def _zygote() -> tuple[Zygote, int]:
    r, w = os.pipe()
    os.set_blocking(r, False)
    return Zygote(fin=-1, fout=w), r


def test_the_worker_answers_a_cancelled_queued_request_and_only_that() -> None:
    zygote, out = _zygote()
    other = dataclasses.replace(REQUEST, id=8)
    zygote.handle(m.Export(REQUEST))
    zygote.handle(m.Export(other))
    zygote.handle(m.Cancel(7))
    assert list(zygote.queue) == [other]
    assert m.FrameDecoder().feed(os.read(out, 1 << 16)) == [m.Finished(7, FileResult(path=REQUEST.path), cancelled=True)]
    zygote.handle(m.Exit())
    assert zygote.exiting


def test_the_worker_turns_job_events_into_progress_and_a_result() -> None:
    zygote, out = _zygote()
    attempt = Attempt()
    decls = (TargetDecl("A", 2, "decorator", False), TargetDecl("B", 9, "decorator", False))
    assert on_event(m.TargetsFound(decls), REQUEST, attempt, zygote.send)
    assert on_event(m.TargetBegins("B"), REQUEST, attempt, zygote.send)
    # A phase of the same target is progress to show, not a new timeout period.
    assert not on_event(m.Phase("B", "lowering: executorch"), REQUEST, attempt, zygote.send)
    done = TargetResult("B", 9, "ok")
    assert not on_event(m.TargetDone(done), REQUEST, attempt, zygote.send)
    assert not on_event(m.JobResult(RESULT), REQUEST, attempt, zygote.send)
    assert (attempt.decls, attempt.current, attempt.done, attempt.result) == (list(decls), "B", [(done, [])], RESULT)
    assert m.FrameDecoder().feed(os.read(out, 1 << 16)) == [m.TargetProgress(7, "B", 2, 2), m.TargetProgress(7, "B", 2, 2, "lowering: executorch")]
