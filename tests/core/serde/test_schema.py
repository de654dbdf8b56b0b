"""The torch-free wire schema (v2) and its reader: version rules, unknown fields, canonical bytes."""

from __future__ import annotations

import subprocess
import sys

import msgpack
import pytest

from exportlens.core.serde import codec
from exportlens.core.serde import schema as S
from exportlens.core.serde.codec import SchemaError
from exportlens.core.serde.reader import expr_text, read_program

from .documents import SYM, pack, program_doc


def test_version_rules_documented() -> None:
    doc = S.__doc__ or ""
    assert "major moves" in doc and "minor moves" in doc
    assert isinstance(S.SCHEMA_VERSION, tuple) and len(S.SCHEMA_VERSION) == 2


def test_reads_a_hand_made_program() -> None:
    pm = read_program(pack(program_doc()))
    assert pm.signature.torch_text() == "\n# inputs\nw: PARAMETER target='w'\nx: USER_INPUT\n\n# outputs\nadd: USER_OUTPUT\n"
    x = pm.signature.inputs[1].arg.meta
    assert x is not None and x.shape == ("s0", 3) and x.dtype == "float32" and x.device == "cpu"
    add = pm.nodes[2]
    assert (add.op, add.target, add.args) == ("call_function", "torch.ops.aten.add.Tensor", ("x", "w"))
    assert add.source is not None and (add.source.file, add.source.line, add.source.function) == ("m.py", 3, "forward")
    assert pm.nodes[3].args == ("(add,)",)
    assert pm.ranges == {"s0": (2, None)} and pm.has_weights and pm.torch_version == "2.13.0"
    assert [(d.code, d.line, d.column, d.target) for d in pm.diagnostics] == [("mutation/buffer", 3, 5, "M")]


def test_unknown_field_ids_and_trailing_elements_are_ignored() -> None:
    doc = program_doc()
    doc[99] = {"from": "a newer minor version"}
    doc[S.P_GRAPH][0][2].append("a new trailing node element")
    doc[S.P_SIGNATURE][S.S_INPUTS][0].append(12345)
    assert read_program(pack(doc)).signature == read_program(pack(program_doc())).signature


def test_unknown_kind_survives_decoding() -> None:
    doc = program_doc()
    doc[S.P_STRINGS][11] = "SOME_FUTURE_KIND"
    assert read_program(pack(doc)).signature.inputs[1].kind == "SOME_FUTURE_KIND"


def test_newer_minor_accepted_major_mismatch_refused() -> None:
    major, minor = S.SCHEMA_VERSION
    assert read_program(pack(program_doc([major, minor + 5]))).signature.inputs
    with pytest.raises(SchemaError, match="major versions differ"):
        read_program(pack(program_doc([major + 1, 0])))
    with pytest.raises(SchemaError, match="version"):
        read_program(pack({S.P_STRINGS: []}))


def test_version_1_documents_are_refused_with_a_clear_error() -> None:
    with pytest.raises(SchemaError, match="1.0 is not readable"):
        read_program(pack({1: [1, 0], 2: {}}))


def test_dangling_references_are_schema_errors() -> None:
    for mutate in (
        lambda d: d[S.P_GRAPH][0][2].__setitem__(S.N_NAME, 999),  # string id out of range
        lambda d: d[S.P_GRAPH][0][2].__setitem__(S.N_ARGS, [[S.A_NODE, 7]]),  # node not defined yet
        lambda d: d[S.P_GRAPH][0][2].__setitem__(S.N_ARGS, [[77, 1]]),  # unknown tag
        lambda d: d[S.P_GRAPH][0][0].__setitem__(S.N_OP, 9),  # unknown op
        lambda d: d.__setitem__(S.P_STRINGS, [1, 2]),  # not strings
        lambda d: d[S.P_SIGNATURE].__setitem__(S.S_INPUTS, [[10, [42, 0], None, None]]),
    ):
        doc = program_doc()
        mutate(doc)
        with pytest.raises(SchemaError):
            read_program(pack(doc))


@pytest.mark.parametrize(
    ("srepr", "text"),
    [
        (SYM, "s0"),
        (f"Mul(Integer(2), {SYM})", "2*s0"),
        (f"Add(Mul(Integer(2), {SYM}), Integer(1))", "2*s0 + 1"),
        (f"Mul(Integer(2), Add({SYM}, Integer(1)))", "2*(s0 + 1)"),
        (f"FloorDiv({SYM}, Integer(2))", "FloorDiv(s0, 2)"),
        ("Integer(-3)", "-3"),
        ("not srepr ((", "not srepr (("),
    ],
)
def test_expression_text(srepr: str, text: str) -> None:
    assert expr_text(srepr) == text


def test_codec_refuses_non_maps_and_bad_versions() -> None:
    for bad in (msgpack.packb([1, 0]), msgpack.packb({1: ["1", 0]}), msgpack.packb({1: [2]})):
        with pytest.raises(SchemaError):
            codec.check_version(codec.unpack(bad), S.SCHEMA_VERSION)


def test_schema_and_reader_do_not_import_torch() -> None:
    code = "import sys, exportlens.core.serde.schema, exportlens.core.serde.codec, exportlens.core.serde.reader, exportlens.program; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
