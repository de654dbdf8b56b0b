"""The torch-free wire schema and codec: version rules, unknown fields, canonical bytes."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import Annotated

import msgpack
import pytest

from exportlens.core import codec, schema
from exportlens.core.codec import SchemaError


@dataclass
class Point:
    x: Annotated[int, 1]
    label: Annotated[str, 2] = ""
    tags: Annotated[dict[str, float], 3] = None  # type: ignore[assignment]


def _program(version: list[int]) -> schema.Program:
    g = schema.Graph(inputs=[schema.Argument.create(as_tensor=schema.TensorArgument("x"))], outputs=[], nodes=[], tensor_values={}, sym_int_values={})
    sig = schema.GraphSignature(input_specs=[schema.InputSpec.create(user_input=schema.UserInputSpec(arg=schema.Argument.create(as_tensor=schema.TensorArgument("x"))))], output_specs=[])
    ep = schema.ExportedProgram(graph_module=schema.GraphModule(graph=g, signature=sig), range_constraints={"s0": schema.RangeConstraint(2, None)}, schema_version=schema.SchemaVersion(schema.TORCH_SCHEMA_MAJOR, 0))
    return schema.Program(version=version, program=ep)


def test_version_rules_documented() -> None:
    doc = schema.__doc__ or ""
    assert "major moves when a field is removed" in doc and "minor moves when a field or a union tag is added" in doc
    assert isinstance(schema.SCHEMA_VERSION, tuple) and len(schema.SCHEMA_VERSION) == 2


def test_union_create_and_roundtrip() -> None:
    a = schema.Argument.create(as_ints=[1, 2])
    assert a.type == "as_ints" and a.value == [1, 2]
    assert codec.to_tree(a) == {70: [1, 2]}
    assert codec.from_tree(schema.Argument, {70: [1, 2]}) == a
    with pytest.raises(ValueError):
        schema.Argument.create(as_int=1, as_float=2.0)


def test_maps_keyed_by_field_id_and_defaults_omitted() -> None:
    assert codec.to_tree(Point(3)) == {1: 3, 3: None} or codec.to_tree(Point(3)) == {1: 3}
    assert codec.to_tree(Point(3, "a", {"b": 1.0, "a": 2.0})) == {1: 3, 2: "a", 3: {"a": 2.0, "b": 1.0}}


def test_unknown_field_ids_are_ignored() -> None:
    tree = codec.unpack(codec.encode(_program(list(schema.SCHEMA_VERSION))))
    tree[99] = {"future": [1, 2, 3]}
    tree[2][10][10][777] = "new graph field"
    doc = codec.from_tree(schema.Program, codec.unpack(codec.encode(tree)))
    assert doc.program.graph_module.graph.inputs[0].value.name == "x"


def test_newer_minor_accepted_major_mismatch_refused() -> None:
    major, minor = schema.SCHEMA_VERSION
    newer = codec.encode(_program([major, minor + 5]))
    assert codec.decode(schema.Program, newer, schema.SCHEMA_VERSION).version == [major, minor + 5]
    with pytest.raises(SchemaError, match="major"):
        codec.decode(schema.Program, codec.encode(_program([major + 1, 0])), schema.SCHEMA_VERSION)
    with pytest.raises(SchemaError, match="version"):
        codec.decode(schema.Program, msgpack.packb({2: {}}), schema.SCHEMA_VERSION)


def test_torch_graph_schema_major_refused_by_reader() -> None:
    from exportlens.core.program_model import read_program

    doc = _program(list(schema.SCHEMA_VERSION))
    assert read_program(codec.encode(doc)).signature.inputs[0].kind == "USER_INPUT"
    doc.program.schema_version = schema.SchemaVersion(schema.TORCH_SCHEMA_MAJOR + 1, 0)
    with pytest.raises(SchemaError, match="torch graph schema"):
        read_program(codec.encode(doc))


def test_canonical_bytes() -> None:
    a = codec.encode(Point(1, "z", {"b": 1.0, "a": 2.0}))
    b = codec.encode(Point(1, "z", {"a": 2.0, "b": 1.0}))
    assert a == b
    assert codec.encode(_program([1, 0])) == codec.encode(_program([1, 0]))


def test_unknown_union_tag_and_wrong_types_are_schema_errors() -> None:
    for tp, tree in [(schema.Argument, {9999: 1}), (schema.Argument, {20: {10: 5}}), (schema.Argument, {}), (schema.TensorMeta, {10: 7}), (schema.Device, {10: "cpu", 20: "x"}), (schema.TensorMeta, {10: 12345, 20: [], 30: False, 40: {10: "cpu"}})]:
        with pytest.raises(SchemaError):
            codec.from_tree(tp, tree)


def test_schema_and_codec_do_not_import_torch() -> None:
    code = "import sys, exportlens.core.schema, exportlens.core.codec, exportlens.core.program_model, exportlens.program; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
