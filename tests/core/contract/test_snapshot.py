"""The snapshot file: the recorded form of a signature (dims named as declared), the
same bytes for the same signatures, and hostile files refused with a clear message."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from exportlens.core.contract import snapshot
from exportlens.core.contract.snapshot import Snapshot, SnapshotError, SpecEntry, TargetEntry, dumps, entry_of, loads
from exportlens.core.model.signature import ArgSpec, InputSpec, OutputSpec, Signature, SourceLine, TensorMeta


def signature(dim_names: dict[str, str] | None = None) -> Signature:
    x = TensorMeta("float32", ("s77", 8), "cpu")
    y = TensorMeta("float32", ("2*s47 + 1", "s77"), "cpu")
    return Signature(
        (
            InputSpec("PARAMETER", ArgSpec("tensor", "p_fc_weight", meta=TensorMeta("float32", (4, 8), "cpu")), "fc.weight", None, SourceLine(5)),
            InputSpec("BUFFER", ArgSpec("tensor", "b_steps", meta=TensorMeta("float32", (1,), "cpu")), "steps", False, SourceLine(6)),
            InputSpec("USER_INPUT", ArgSpec("tensor", "x", meta=x), None, None, SourceLine(9)),
            InputSpec("USER_INPUT", ArgSpec("symint", "n", value="s3"), None, None, SourceLine(9)),
            InputSpec("USER_INPUT", ArgSpec("constant", "flag", value=float("nan"))),
        ),
        (OutputSpec("USER_OUTPUT", ArgSpec("tensor", "linear_7", meta=y), None, SourceLine(10)),),
        {"s77": (1, 32), "s47": (2, 64), "2*s47 + 1": (5, 129), "s3": (0, None)},
        dim_names or {},
    )


def test_dims_are_named_as_declared_inside_expressions_too() -> None:
    e = entry_of(signature({"s77": "batch", "s47": "width"}))
    assert e.inputs[2].shape == ("batch", 8)
    assert e.outputs[0].shape == ("2*width + 1", "batch")
    assert e.inputs[3].value == "s3"  # unnamed (Dim.AUTO): torch's symbol stays
    assert e.ranges == {"batch": (1, 32), "width": (2, 64), "2*width + 1": (5, 129), "s3": (0, None)}


def test_what_is_recorded_and_what_is_not() -> None:
    e = entry_of(signature({"s77": "batch"}))
    assert e.outputs[0].name is None  # graph node names renumber with unrelated edits
    assert e.inputs[1].persistent is False and e.inputs[0].persistent is None
    assert e.inputs[4].value == "nan"  # JSON has no NaN
    text = dumps(Snapshot({"m.py": {"Net": e}})).decode()
    assert "linear_7" not in text and '"line"' not in text


def test_same_signatures_same_bytes_whatever_the_order() -> None:
    a, b = entry_of(signature({"s77": "batch"})), entry_of(signature())
    one = Snapshot({"b/m.py": {"Zeta": a, "Alpha": b}, "a.py": {"Net": b}})
    two = Snapshot({"a.py": {"Net": b}, "b/m.py": {"Alpha": b, "Zeta": a}})
    data = dumps(one)
    assert data == dumps(two)
    assert data.endswith(b"}\n") and not data.endswith(b"\n\n")
    document = json.loads(data)
    assert list(document) == ["version", "files"] and list(document["files"]) == ["a.py", "b/m.py"]
    assert list(document["files"]["b/m.py"]) == ["Alpha", "Zeta"]
    # One spec per line: a changed spec is a one-line diff.
    spec_lines = [line for line in data.decode().splitlines() if line.strip().startswith('{"arg"')]
    assert len(spec_lines) == 3 * (5 + 1)
    assert loads(data) == one


def test_empty_snapshot_is_valid_json() -> None:
    assert json.loads(dumps(Snapshot())) == {"version": 1, "files": {}}
    assert loads(dumps(Snapshot())) == Snapshot()


def test_write_is_atomic_and_skips_identical_bytes(tmp_path: Path) -> None:
    path = str(tmp_path / snapshot.SNAPSHOT_NAME)
    s = Snapshot({"m.py": {"Net": entry_of(signature())}})
    assert snapshot.write(path, s) is True
    assert snapshot.write(path, s) is False
    assert snapshot.read(path) == s
    assert [p.name for p in tmp_path.iterdir()] == [snapshot.SNAPSHOT_NAME]  # no temporary file left


def test_read_follows_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / snapshot.SNAPSHOT_NAME
    assert snapshot.read(str(path)) is None
    path.write_bytes(dumps(Snapshot({"m.py": {}})))
    assert snapshot.read(str(path)) == Snapshot({"m.py": {}})
    path.write_bytes(dumps(Snapshot({"n.py": {}})))
    assert snapshot.read(str(path)) == Snapshot({"n.py": {}})
    path.write_bytes(b"{")
    with pytest.raises(SnapshotError, match="not valid JSON"):
        snapshot.read(str(path))


GOOD_SPEC = {"kind": "USER_INPUT", "arg": "tensor", "target": None, "name": "x", "dtype": "float32", "shape": ["batch", 8], "device": "cpu"}


def doc(**files: object) -> bytes:
    return json.dumps({"version": 1, "files": files}).encode()


BAD: list[tuple[str, bytes, str]] = [
    ("merge conflict", b'{\n<<<<<<< HEAD\n  "version": 1\n=======\n>>>>>>> other\n}\n', "merge conflict"),
    ("not utf-8", b'{"version": 1, "files": {"\xff": {}}}', "not UTF-8"),
    ("a list", b"[]", "top level"),
    ("newer format", b'{"version": 2, "files": {}}', "newer exportlens"),
    ("no version", b'{"files": {}}', '"version"'),
    ("boolean version", b'{"version": true, "files": {}}', '"version"'),
    ("files not a map", b'{"version": 1, "files": []}', '"files"'),
    ("target not a map", doc(**{"m.py": {"Net": 3}}), "files['m.py']['Net'] is not an object"),
    ("no inputs", doc(**{"m.py": {"Net": {"outputs": [], "ranges": {}}}}), ".inputs is missing"),
    ("spec without kind", doc(**{"m.py": {"Net": {"inputs": [{"arg": "tensor"}], "outputs": []}}}), ".inputs[0].kind"),
    ("shape of floats", doc(**{"m.py": {"Net": {"inputs": [{**GOOD_SPEC, "shape": [1.5]}], "outputs": []}}}), ".shape"),
    ("shape of booleans", doc(**{"m.py": {"Net": {"inputs": [{**GOOD_SPEC, "shape": [True]}], "outputs": []}}}), ".shape"),
    ("value a map", doc(**{"m.py": {"Net": {"inputs": [{**GOOD_SPEC, "value": {}}], "outputs": []}}}), ".value"),
    ("range of three", doc(**{"m.py": {"Net": {"inputs": [], "outputs": [], "ranges": {"b": [1, 2, 3]}}}}), "ranges['b']"),
    ("range of text", doc(**{"m.py": {"Net": {"inputs": [], "outputs": [], "ranges": {"b": ["1", 2]}}}}), "ranges['b']"),
    ("deep nesting", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
]


@pytest.mark.adversarial
@pytest.mark.parametrize(("what", "data", "message"), BAD, ids=[b[0] for b in BAD])
def test_hostile_files_are_refused_with_a_clear_message(what: str, data: bytes, message: str) -> None:
    with pytest.raises(SnapshotError, match=None) as e:
        loads(data)
    assert message in str(e.value)


@pytest.mark.adversarial
def test_an_oversized_file_is_not_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "MAX_BYTES", 1000)
    path = tmp_path / snapshot.SNAPSHOT_NAME
    path.write_bytes(b" " * 2000)
    with pytest.raises(SnapshotError, match="over"):
        snapshot.read(str(path))


def test_a_good_hand_written_entry_reads() -> None:
    got = loads(doc(**{"m.py": {"Net": {"inputs": [GOOD_SPEC], "outputs": [], "ranges": {"batch": [1, None]}}}}))
    assert got.files["m.py"]["Net"] == TargetEntry((SpecEntry("USER_INPUT", "tensor", None, "x", None, "float32", ("batch", 8), "cpu"),), (), {"batch": (1, None)})


@pytest.mark.adversarial
def test_a_fifo_named_like_the_snapshot_does_not_hang(tmp_path: Path) -> None:
    path = tmp_path / snapshot.SNAPSHOT_NAME
    os.mkfifo(path)
    with pytest.raises(SnapshotError, match="not a regular file"):
        snapshot.read(str(path))
