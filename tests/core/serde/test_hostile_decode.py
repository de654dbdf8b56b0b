"""Crafted hostile payloads for ``loads``/``read_program`` (issue 10, findings 1-4).

Each starts from the bytes of a small real program (:mod:`models`) and edits the
decoded msgpack structure: a name holding code, an expression that never finishes, a
record that is well-formed alone but inconsistent as a program. Code would create the
file ``PWNED`` in the test's working folder; every test checks that it did not.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import torch

from exportlens import program as P
from exportlens.core.serde import codec
from exportlens.core.serde import schema as S
from exportlens.core.serde.codec import SchemaError

from . import models
from .fuzzing import Corpus, decode_in_children
from .mutate import HOSTILE_EXPRESSIONS

pytestmark = pytest.mark.adversarial

MARKER = "PWNED"
CODE = f"open('{MARKER}','w')"


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)  # the marker is a relative name: no dot or slash to get past a check
    yield tmp_path
    assert not (tmp_path / MARKER).exists(), "code from the bytes ran"


def _edit(name: str, change: Callable[[dict[int, Any]], Any]) -> bytes:
    doc = codec.unpack(models.payload(name))
    change(doc)
    return msgpack.packb(doc, use_bin_type=True)


def _node(doc: dict[int, Any], name: str) -> list[Any]:
    st = doc[S.P_STRINGS]
    return next(n for n in doc[S.P_GRAPH][S.G_NODES] if n[S.N_OP] != S.OP_OUTPUT and st[n[S.N_NAME]] == name)


def _output(doc: dict[int, Any]) -> list[Any]:
    return next(n for n in doc[S.P_GRAPH][S.G_NODES] if n[S.N_OP] == S.OP_OUTPUT)


def _rename(text: str, new: str) -> Callable[[dict[int, Any]], None]:
    """Replace a string of the table: every record that refers to it changes with it."""

    def change(doc: dict[int, Any]) -> None:
        st = doc[S.P_STRINGS]
        st[st.index(text)] = new

    return change


def _add_string(doc: dict[int, Any], text: str) -> int:
    doc[S.P_STRINGS].append(text)
    return len(doc[S.P_STRINGS]) - 1


def _call(name: str, ep: Any) -> Any:
    spec = models.inputs(name)
    args = tuple(torch.full(s["shape"], 0.5) for s in spec["args"])
    return ep.module()(*args, **{k: torch.full(s["shape"], 0.5) for k, s in spec["kwargs"].items()})


# ---- finding 1: code that ran while the program was built


@pytest.mark.parametrize("name", [f"x={CODE}", f"x=[{CODE}]", f"x=({CODE} and None)"])
def test_placeholder_name_with_a_default_argument_never_runs(name: str) -> None:
    # The placeholder and its signature argument share the string "x".
    with pytest.raises(SchemaError, match="not a Python identifier"):
        P.loads(_edit("static", _rename("x", name)))


def test_forward_argument_name_with_code_is_refused() -> None:
    # ep.module() writes the call graph's forward argument names into ``def forward``.
    def change(doc: dict[int, Any]) -> None:
        doc[S.P_CALL_GRAPH][0][1][4] = [_add_string(doc, f"x={CODE}")]

    with pytest.raises(SchemaError, match="forward argument"):
        P.loads(_edit("static", change))


def test_repeated_forward_argument_names_are_refused() -> None:
    # ``def forward(self, x, x)`` would not compile: ep.module() failed after loads.
    def change(doc: dict[int, Any]) -> None:
        names = doc[S.P_CALL_GRAPH][0][1][4]
        names.append(names[0])

    with pytest.raises(SchemaError, match="forward argument names repeat"):
        P.loads(_edit("dynamic", change))


# ---- finding 2: code that ran when the loaded program was called


def test_keyword_argument_name_with_code_never_runs() -> None:
    def change(doc: dict[int, Any]) -> None:
        softmax = _node(doc, "softmax")
        softmax[S.N_ARGS] = softmax[S.N_ARGS][:1]
        softmax[S.N_KWARGS] = [[_add_string(doc, f"dim={CODE} and -1)#"), -1]]

    with pytest.raises(SchemaError, match="keyword argument"):
        _call("static", P.loads(_edit("static", change)))


@pytest.mark.parametrize("target", ["lin.weight", "seq.0.weight"])
def test_attribute_target_with_code_never_runs(target: str) -> None:
    # ep.module() turns a parameter's target into ``getattr(self.seq, "0")``: a quote
    # in the target would end that string. The weight record shares the string.
    head, _, tail = target.rpartition(".")
    hostile = f'{head}.{tail}", {CODE}, "x'
    with pytest.raises(SchemaError, match="not a dotted path"):
        _call("static", P.loads(_edit("static", _rename(target, hostile))))


def test_keyword_name_in_an_input_spec_is_refused() -> None:
    # ep.module() writes ``{'scale': scale}`` from the in_spec's keyword names.
    def change(doc: dict[int, Any]) -> None:
        st = doc[S.P_STRINGS]
        i = next(k for k, text in enumerate(st) if '"builtins.dict"' in text)
        spec = json.loads(st[i])
        spec[1]["children_spec"][1]["context"] = json.dumps([f"scale': {CODE}, 'z"])
        st[i] = json.dumps(spec)

    with pytest.raises(SchemaError, match="keyword argument name in an input spec"):
        _call("kwargs", P.loads(_edit("kwargs", change)))


@pytest.mark.parametrize(
    ("text", "what"),
    [("seq.0", "module path"), ("seq", "module path"), ("true_graph_0", "subgraph name")],
)
def test_module_paths_and_subgraph_names_are_checked(text: str, what: str) -> None:
    # Call graph fqns and nn_module_stack paths become ``call_module`` targets when
    # the program is unflattened; subgraph names become attributes.
    name = "cond" if text == "true_graph_0" else "static"
    for hostile in (f'{text}", {CODE}, "x', "class", f"{text}\nx"):
        with pytest.raises(SchemaError, match=what):
            P.loads(_edit(name, _rename(text, hostile)))


def test_a_carriage_return_in_a_stack_trace_is_refused() -> None:
    # fx prints a trace's last line in a ``#`` comment; a lone \r would end the comment.
    def change(doc: dict[int, Any]) -> None:
        st = doc[S.P_STRINGS]
        i = next(k for k, text in enumerate(st) if text.startswith("File "))
        st[i] = st[i] + f"\r{CODE}"

    with pytest.raises(SchemaError, match="carriage return"):
        P.loads(_edit("static", change))


def test_valid_programs_still_load_and_run() -> None:
    for name in models.MODELS:
        ep = P.loads(models.payload(name))
        torch.testing.assert_close(_call(name, ep), _call(name, models.program(name)))


# ---- finding 3: expressions that never finish


def test_hostile_expressions_are_refused_within_the_limits(tmp_path: Path) -> None:
    """Each expression replaces ``FloorDiv(s77, 2)`` (a size of the slice) in the dynamic
    program, decoded in a child with a 5 s CPU and a 1 GiB memory limit."""
    doc = codec.unpack(models.payload("dynamic"))
    st = doc[S.P_STRINGS]
    floordiv = next(i for i, text in enumerate(st) if text.startswith("FloorDiv("))
    payloads = []
    for expr in HOSTILE_EXPRESSIONS:
        st[floordiv] = expr
        payloads.append(msgpack.packb(doc, use_bin_type=True))
    corpus = Corpus(bases=[models.payload("dynamic")], inputs=[models.inputs("dynamic")], explicit=payloads)
    report = decode_in_children(corpus, tmp_path, len(payloads), workers=1)
    assert not report.killed, f"over a limit: {[HOSTILE_EXPRESSIONS[k['i']][:60] for k in report.killed]}"
    assert [o["loads"] for o in report.outcomes] == ["SchemaError"] * len(payloads)
    assert {o["read"] for o in report.outcomes} <= {"ok", "SchemaError"}


def test_a_long_string_referenced_many_times_stays_small(tmp_path: Path) -> None:
    """80 KB of bytes: one 20,000-character string as each of 20,000 arguments. Read as
    text (``read_program``) or pasted into generated code (``loads``) it used to be
    400 MB; each decoder's output must stay in proportion to its input."""

    def change(doc: dict[int, Any]) -> None:
        sid = _add_string(doc, "a" * 20_000)
        _node(doc, "softmax")[S.N_ARGS] = [[S.A_STR, sid]] * 20_000

    corpus = Corpus(bases=[models.payload("static")], inputs=[models.inputs("static")], explicit=[_edit("static", change)])
    (outcome,) = decode_in_children(corpus, tmp_path, 1, workers=1).outcomes
    assert (outcome["read"], outcome["loads"]) == ("ok", "SchemaError")
    assert outcome["rss"] < 128 << 20


# ---- finding 4: one documented exception


MALFORMED: dict[str, tuple[str, Callable[[dict[int, Any]], Any]]] = {
    # What each raised before: SpecViolationError, ValueError, TypeError, KeyError,
    # IndexError, AttributeError (from torch's graph building and ExportedProgram).
    "inputs out of order": ("static", lambda d: d[S.P_SIGNATURE][S.S_INPUTS].reverse()),
    "no outputs in the signature": ("kwargs", lambda d: d[S.P_SIGNATURE].__setitem__(S.S_OUTPUTS, [])),
    "weights neither stored nor given": ("static", lambda d: d.pop(S.P_WEIGHTS)),
    "output is a number": ("static", lambda d: _output(d)[S.N_ARGS].__setitem__(0, -269)),
    "getitem of a number": ("cond", lambda d: _node(d, "getitem")[S.N_ARGS].__setitem__(0, 47)),
    "operator without its argument": ("kwargs", lambda d: _node(d, "le")[S.N_ARGS].pop()),
    "subgraph missing": ("cond", lambda d: d[S.P_GRAPH].__setitem__(S.G_SUBGRAPHS, [])),
    "a range upside down": ("dynamic", lambda d: d[S.P_RANGES][0].__setitem__(slice(1, 3), [100, 3])),
    # Sparse weights (records: 0 the COO "heads", 1 the CSR "mix"): torch's invariant
    # checks, not a tensor that reads out of bounds when used.
    "sparse index out of bounds": ("sparse", lambda d: _sparse_part(d, 0, 0).__setitem__(2, struct.pack("<6q", *[99] * 6))),
    "sparse negative index": ("sparse", lambda d: _sparse_part(d, 0, 0).__setitem__(2, struct.pack("<6q", *[-1] * 6))),
    "sparse indices as floats": ("sparse", lambda d: _sparse_part(d, 0, 0).__setitem__(slice(0, 3), [d[S.P_WEIGHTS][0][2], [2, 3], bytes(24)])),
    "sparse values of another dtype": ("sparse", lambda d: _sparse_part(d, 0, 1).__setitem__(slice(0, 3), [d[S.P_STRINGS].index("int64"), [3], bytes(24)])),
    "sparse layout unknown": ("sparse", lambda d: d[S.P_WEIGHTS][0][6].__setitem__(0, d[S.P_WEIGHTS][0][2])),
    "sparse shape beyond int64": ("sparse", lambda d: d[S.P_WEIGHTS][0].__setitem__(3, [1 << 62, 1 << 62])),
    "sparse record not a list": ("sparse", lambda d: d[S.P_WEIGHTS][0].__setitem__(6, 7)),
    "sparse CSR rows out of order": ("sparse", lambda d: _sparse_part(d, 1, 0).__setitem__(2, struct.pack("<3q", 0, 3, 2))),
    "sparse CSR without its values": ("sparse", lambda d: d[S.P_WEIGHTS][1][6].pop()),
}


def _sparse_part(doc: dict[int, Any], record: int, part: int) -> list[Any]:
    return doc[S.P_WEIGHTS][record][6][2 + part]


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_programs_raise_only_schema_error(case: str) -> None:
    name, change = MALFORMED[case]
    data = _edit(name, change)
    with pytest.raises(SchemaError):
        P.loads(data)
    try:
        P.read_program(data)
    except SchemaError:
        pass


def test_read_program_overflow_is_a_schema_error() -> None:
    # A source location's line number is an int; infinity used to escape as OverflowError.
    data = _edit("static", lambda d: _node(d, "linear")[S.N_META].__setitem__(S.M_LOCATION, [0, float("inf"), 0]))
    with pytest.raises(SchemaError):
        P.read_program(data)
