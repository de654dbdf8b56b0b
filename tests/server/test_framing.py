"""LspFrameDecoder on its own: well-formed streams in any split, and every way a frame can
be wrong: the messages after it are still read, and each problem is one warning."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from exportlens.server.framing import MAX_HEADER, LspFrameDecoder, content_length

pytestmark = pytest.mark.adversarial


def frame(message: Any, length: int | None = None) -> bytes:
    body = json.dumps(message, ensure_ascii=False).encode()
    return b"Content-Length: %d\r\n\r\n" % (len(body) if length is None else length) + body


def msg(n: int, text: str = "") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "method": "m", "params": {"text": text}}


def decode(*chunks: bytes) -> tuple[list[Any], list[str]]:
    warnings: list[str] = []
    decoder = LspFrameDecoder(warnings.append, max_body=10_000_000)
    out: list[Any] = []
    for chunk in chunks:
        decoder.feed(chunk)
        out.extend(decoder.messages())
    return out, warnings


def test_a_well_formed_stream_in_any_split_and_with_content_type() -> None:
    messages = [msg(i, "é ü 中 \r\n Content-Length: 5\r\n\r\n" * i) for i in range(30)]
    stream = b"".join(frame(m) for m in messages)
    stream += b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: 2\r\n\r\n{}"
    expected = [*messages, {}]
    rng = random.Random(7)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(1, 40)))
        chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        assert decode(*chunks) == (expected, [])
    assert decode(*(bytes([b]) for b in stream)) == (expected, [])


@pytest.mark.parametrize(
    ("stream", "ids", "warned"),
    [
        # Content-Length too long: the message, then the frames it ran into.
        (frame(msg(1), 80) + frame(msg(2)) + frame(msg(3)), [1, 2, 3], "does not match"),
        # too short (a client counting characters, not bytes): read anyway
        (frame(msg(1, "ééé"), len(json.dumps(msg(1, "ééé"), ensure_ascii=False))) + frame(msg(2)), [1, 2], "does not match"),
        (frame(msg(1), 10) + frame(msg(2)), [1, 2], "does not match"),
        # not JSON, not a header, too large, two lengths, no length
        (b"Content-Length: 5\r\n\r\nhello" + frame(msg(2)), [2], "not a JSON message"),
        (b"Content-Length: x\r\n\r\n" + frame(msg(2)), [2], "not one"),
        (b"Content-Length: 10000001\r\n\r\n" + frame(msg(2)), [2], "more than"),
        (b"Content-Length: 3\r\nContent-Length: 4\r\n\r\n" + frame(msg(2)), [2], "not one"),
        (b"Content-Type: text\r\n\r\n" + frame(msg(2)), [2], "not one"),
        (b"\x00\xffjunk" + frame(msg(2)), [2], "not one"),
        # a body nested too deep for the parser
        (b"Content-Length: 30001\r\n\r\n" + b"[" * 30_000 + b"]" + frame(msg(2)), [2], "not a JSON message"),
        # a JSON value that is no message where the length is wrong: dropped
        (b"Content-Length: 2\r\n\r\n[1, 2]" + frame(msg(2)), [2], "not a JSON message"),
    ],
)
def test_a_bad_frame_costs_at_most_itself(stream: bytes, ids: list[int], warned: str) -> None:
    out, warnings = decode(stream)
    assert [m["id"] for m in out] == ids
    assert warnings and warned in warnings[0], warnings
    # Byte by byte (the worst split): the same messages.
    out, _ = decode(*(stream[i : i + 1] for i in range(len(stream))))
    assert [m["id"] for m in out] == ids


def test_a_long_frame_waits_for_its_body_until_the_next_frame_shows_where_it_ends() -> None:
    warnings: list[str] = []
    decoder = LspFrameDecoder(warnings.append)
    decoder.feed(frame(msg(1), 5000))
    assert list(decoder.messages()) == [] and warnings == []
    decoder.feed(frame(msg(2)))
    assert [m["id"] for m in decoder.messages()] == [1, 2]
    assert decoder.pending == 0


def test_a_short_frame_whose_rest_is_still_arriving_is_read_once_it_has() -> None:
    whole = frame(msg(1, "x" * 100), 20)
    warnings: list[str] = []
    decoder = LspFrameDecoder(warnings.append)
    decoder.feed(whole[:60])
    assert list(decoder.messages()) == []
    decoder.feed(whole[60:])
    assert [m["id"] for m in decoder.messages()] == [1]


def test_noise_without_any_header_is_dropped_and_memory_stays_bounded() -> None:
    warnings: list[str] = []
    decoder = LspFrameDecoder(warnings.append)
    for _ in range(100):
        decoder.feed(b"noise " * 1000)
        assert list(decoder.messages()) == []
        assert decoder.pending < MAX_HEADER + 6000
    decoder.feed(frame(msg(9)))
    assert [m["id"] for m in decoder.messages()] == [9]
    assert warnings


@pytest.mark.parametrize(
    ("block", "length"),
    [
        (b"Content-Length: 12", 12),
        (b"content-length:12", 12),
        (b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: 3", 3),
        (b"Content-Length: -3", None),
        (b"Content-Length: 3.0", None),
        (b"Content-Length: 1234567890123", None),
        (b"Content-Type: x", None),
        (b"garbage", None),
        (b"", None),
    ],
)
def test_content_length_of_a_header_block(block: bytes, length: int | None) -> None:
    assert content_length(block) == length
