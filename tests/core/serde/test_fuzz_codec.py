"""Hostile bytes: every failure is a SchemaError, quickly, with no outsized allocation."""

from __future__ import annotations

import random
import struct
import tracemalloc

import msgpack
import pytest

from exportlens.core.serde import codec
from exportlens.core.serde import schema as S
from exportlens.core.serde.codec import SchemaError
from exportlens.core.serde.reader import read_program

from .documents import pack, program_doc

pytestmark = pytest.mark.adversarial


def _payload() -> bytes:
    return pack(program_doc())


def _reads_or_schema_error(data: bytes) -> None:
    try:
        read_program(data)
    except SchemaError:
        pass


def test_real_payload_reads() -> None:
    pm = read_program(_payload())
    assert pm.nodes[2].source is not None and pm.nodes[2].source.line == 3
    assert pm.nodes[1].meta[0] is not None and pm.nodes[1].meta[0].shape == ("s0", 3)


def test_truncations() -> None:
    data = _payload()
    for n in range(len(data)):
        _reads_or_schema_error(data[:n])


def test_mutations() -> None:
    data = _payload()
    rng = random.Random(1234)
    for _ in range(3000):
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(b))
            b[i] = rng.randrange(256) if rng.random() < 0.7 else b[i] ^ (1 << rng.randrange(8))
        _reads_or_schema_error(bytes(b))


HOSTILE = {
    "array 2**32": b"\xdd\xff\xff\xff\xff" + b"\x00" * 5,
    "map 2**32": b"\xdf\xff\xff\xff\xff" + b"\x00" * 5,
    "str 2**32": b"\xdb\xff\xff\xff\xff" + b"a" * 5,
    "bin 2**32": b"\xc6\xff\xff\xff\xff" + b"a" * 5,
    "ext": msgpack.packb(msgpack.ExtType(5, b"abc")),
    "ext len 0": b"\xc7\x00\x05",
    "timestamp": msgpack.packb(msgpack.Timestamp(1, 0), datetime=False),
    "deep arrays": b"\x91" * 100_000 + b"\x00",
    "deep maps": b"\x81\x01" * 50_000 + b"\x00",
    "float key": msgpack.packb({1.5: 1}),
    "array key": b"\x81\x91\x01\x02",
    "bool key": msgpack.packb({True: 1}),
    "nil key": msgpack.packb({None: 1}),
    "dup key": b"\x82\x01\x01\x01\x02",
    "not a map": msgpack.packb([1, 0]),
    "bad utf8": b"\xa2\xff\xfe",
    "trailing": msgpack.packb({1: [1, 0]}) + b"\x00",
    "empty": b"",
    "version not ints": msgpack.packb({1: ["1", 0]}),
    "string field ids": msgpack.packb({"1": [1, 0], "2": {}}),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_headers(name: str) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(SchemaError):
            read_program(HOSTILE[name])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 * 1024, f"{name}: peak {peak} bytes"


def _nested_args(depth: int) -> bytes:
    """The hand-made program with its ``add`` argument ``[A_LIST, [A_LIST, ... [A_NODE, 0]]]``."""
    doc = program_doc()
    doc[S.P_GRAPH][0][2][S.N_ARGS] = ["@@DEEP@@"]
    nested = bytes([0x92, S.A_LIST]) * depth + bytes([0x92, S.A_NODE, 0])
    return msgpack.packb(doc).replace(msgpack.packb("@@DEEP@@"), nested)


def test_deep_argument_nesting_is_bounded() -> None:
    assert read_program(_nested_args(300)).nodes[2].args[0].startswith("[[[")
    for depth in (3000, 100_000):
        with pytest.raises(SchemaError):
            read_program(_nested_args(depth))


def test_declared_length_bounded_by_input() -> None:
    for head in (b"\xdd", b"\xdf", b"\xdb", b"\xc6"):
        data = head + struct.pack(">I", 1 << 20) + b"\x00" * 16
        with pytest.raises(SchemaError):
            codec.unpack(data)


def test_non_bytes_input() -> None:
    with pytest.raises(SchemaError):
        read_program("text")  # type: ignore[arg-type]
