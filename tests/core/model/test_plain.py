"""Results survive the trip between processes; garbage is a clear error."""

from __future__ import annotations

import pytest

from exportlens.core.model.plain import WireError, from_plain, pack, to_plain, unpack
from exportlens.core.model.results import Diagnostic, FileResult, Related, TargetResult
from exportlens.core.model.signature import ArgSpec, InputSpec, OutputSpec, Signature, SourceLine, TensorMeta


def sample() -> FileResult:
    meta = TensorMeta("float32", ("s0", 3), "cpu", False)
    sig = Signature(
        (InputSpec("BUFFER", ArgSpec("tensor", "b_steps", meta=TensorMeta("float32", (1,), "cpu")), "steps", True, SourceLine(8, 9, 8, 40)),
         InputSpec("USER_INPUT", ArgSpec("constant", "flag", value=True))),
        (OutputSpec("USER_OUTPUT", ArgSpec("tensor", "add", meta=meta), None, SourceLine(13)),),
        {"s0": (2, None)},
    )
    return FileResult(
        "/m.py",
        (Diagnostic("mutation/buffer", "m", 13, 9, 13, 27, "Counter", (Related("/m.py", 8, "here"),)),),
        (TargetResult("Counter", 4, "ok", 812.5, sig, "graph"),),
        ("/helpers.py",),
    )


def test_round_trip() -> None:
    result = sample()
    assert unpack(FileResult, pack(result)) == result


def test_unknown_fields_are_ignored() -> None:
    plain = to_plain(sample())
    plain["from_the_future"] = 1
    plain["targets"][0]["signature"]["inputs"][0]["extra"] = "x"
    assert from_plain(FileResult, plain) == sample()


@pytest.mark.parametrize("data", [b"", b"\xc1", b"\x93\x01\x02\x03", b"\x81\xa4path\x01"])
def test_garbage_is_a_wire_error(data: bytes) -> None:
    with pytest.raises(WireError):
        unpack(FileResult, data)
