"""``exportlens.core.export.extract`` against real exports of the fixture models.

Each case exports a model from ``tests/fixtures/extract/`` exactly as the worker
does (non-strict ``export`` + ``run_decompositions({})``) and checks the spec list
(kinds, names, targets, order), the tensor metadata, and the exact line (and for
some, column) each spec points at. Expected lines are found through ``# L:tag``
comments in the fixture files, so they are the real line numbers of those files.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from torch.export import Dim

from exportlens.core.export import extract, specsource
from exportlens.core.export.extract import extract_signature, graph_text, tensor_meta
from exportlens.core.model.signature import Signature, SourceLine
from exportlens.core.source.sourcemap import SourceIndex

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "extract"


# -- helpers ------------------------------------------------------------------------------


@cache
def load(name: str) -> ModuleType:
    """Import a fixture file under a unique name (registered, so inspect finds its file)."""
    path = FIXTURES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"exportlens_fixture_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@cache
def index(name: str) -> SourceIndex:
    path = FIXTURES / f"{name}.py"
    return SourceIndex.build(path.read_text(), str(path.resolve()))


def L(tag: str, name: str = "models") -> int:
    """The line of the fixture carrying ``# L:<tag>``."""
    hits = [i for i, text in enumerate(index(name).lines(), 1) if text.rstrip().endswith(f"# L:{tag}")]
    assert len(hits) == 1, f"tag {tag!r} found {len(hits)} times"
    return hits[0]


def col(tag: str, needle: str, name: str = "models") -> int:
    """1-based column of ``needle`` on the tagged line."""
    return index(name).line_text(L(tag, name)).index(needle) + 1


def run(
    cls_name: str,
    args: tuple,
    kwargs: dict | None = None,
    dynamic_shapes: Any = None,
    file: str = "models",
) -> tuple[torch.export.ExportedProgram, Signature]:
    module = getattr(load(file), cls_name)()
    ep = torch.export.export(module, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False)
    ep = ep.run_decompositions({})
    sig = extract_signature(ep, module, index=index(file), args=args, kwargs=kwargs)
    assert sig.torch_text() == str(ep.graph_signature)
    check_meta_matches_nodes(ep, sig)
    return ep, sig


def check_meta_matches_nodes(ep: torch.export.ExportedProgram, sig: Signature) -> None:
    nodes = {n.name: n for n in ep.graph.nodes}
    for spec in (*sig.inputs, *sig.outputs):
        if spec.arg.kind == "tensor":
            assert spec.arg.meta == tensor_meta(nodes[spec.arg.name].meta["val"])
            assert spec.arg.meta is not None


def table(sig: Signature) -> list[tuple]:
    """(kind, name, target, line) of every input, then every output."""
    rows: list[tuple] = []
    for spec in (*sig.inputs, *sig.outputs):
        rows.append((spec.kind, spec.arg.name, spec.target, spec.source.line if spec.source else None))
    return rows


def t(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


# -- cases --------------------------------------------------------------------------------


def test_clean_linear() -> None:
    ep, sig = run("Clean", (t(5, 4),))
    assert table(sig) == [
        ("PARAMETER", "p_fc_weight", "fc.weight", L("clean.fc")),
        ("PARAMETER", "p_fc_bias", "fc.bias", L("clean.fc")),
        ("USER_INPUT", "x", None, L("clean.x")),
        ("USER_OUTPUT", "linear", None, L("clean.return")),
    ]
    x = sig.inputs[2]
    assert x.source == SourceLine(L("clean.x"), col("clean.x", "x)"), L("clean.x"), col("clean.x", "x)") + 1)
    assert x.arg.kind == "tensor" and x.persistent is None
    assert x.arg.meta is not None and x.arg.meta.shape == (5, 4) and x.arg.meta.dtype == "float32"
    assert sig.inputs[0].arg.meta is not None and sig.inputs[0].arg.meta.requires_grad is True
    assert sig.outputs[0].arg.meta is not None and sig.outputs[0].arg.meta.shape == (5, 2)
    assert sig.outputs[0].source is not None and sig.outputs[0].source.column == col("clean.return", "return")
    assert sig.ranges == {}


def test_parameter_buffers_and_persistence() -> None:
    _, sig = run("State", (t(3),))
    assert table(sig) == [
        ("PARAMETER", "p_w", "w", L("state.w")),
        ("BUFFER", "b_scale", "scale", L("state.scale")),
        ("BUFFER", "b_tmp", "tmp", L("state.tmp")),
        ("USER_INPUT", "x", None, L("state.x")),
        ("USER_OUTPUT", "add_1", None, L("state.return")),
    ]
    assert [i.persistent for i in sig.inputs] == [None, True, False, None]
    # register_buffer(...) points at the call itself, not the whole line's indentation.
    assert sig.inputs[1].source is not None and sig.inputs[1].source.column == col("state.scale", "self.")


def test_buffer_mutation_points_at_inplace_call() -> None:
    _, sig = run("BufferMutation", (t(1),))
    assert table(sig)[-2:] == [
        ("BUFFER_MUTATION", "add", "steps", L("bufmut.add_")),
        ("USER_OUTPUT", "add_1", None, L("bufmut.return")),
    ]
    assert sig.inputs[0].source is not None and sig.inputs[0].source.line == L("bufmut.steps")
    where = sig.outputs[0].source
    assert where is not None
    assert (where.column, where.end_column) == (
        col("bufmut.add_", "self.steps"),
        col("bufmut.add_", "  # L"),
    )


def test_user_input_mutation() -> None:
    _, sig = run("InputMutation", (t(3), t(3)))
    assert [(o.kind, o.arg.name, o.target) for o in sig.outputs] == [
        ("USER_INPUT_MUTATION", "mul", "x"),
        ("USER_OUTPUT", "add", None),
    ]
    assert sig.outputs[0].source == SourceLine(
        L("inmut.mul_"), col("inmut.mul_", "x.mul_"), L("inmut.mul_"), col("inmut.mul_", "  # L")
    )


def test_parameter_mutation() -> None:
    _, sig = run("ParameterMutation", (t(3),))
    assert table(sig)[:1] == [("PARAMETER", "p_p", "p", L("pmut.p"))]
    assert sig.inputs[0].arg.meta is not None and sig.inputs[0].arg.meta.requires_grad is False
    assert (sig.outputs[0].kind, sig.outputs[0].target) == ("PARAMETER_MUTATION", "p")
    assert sig.outputs[0].source is not None and sig.outputs[0].source.line == L("pmut.add_")


def test_mutation_without_stack_trace_falls_back_to_the_text() -> None:
    # `self.cache.copy_(x)` becomes "output x as the new cache": a placeholder, no trace.
    ep, sig = run("CopyIntoBuffer", (t(3),))
    out = ep.graph.output_node().args[0][0]
    assert out.op == "placeholder" and "stack_trace" not in out.meta
    assert (sig.outputs[0].kind, sig.outputs[0].arg.name, sig.outputs[0].target) == ("BUFFER_MUTATION", "x", "cache")
    assert sig.outputs[0].source is not None
    assert (sig.outputs[0].source.line, sig.outputs[0].source.column) == (
        L("copy.copy_"),
        col("copy.copy_", "self.cache"),
    )


def test_buffer_reassigned_in_forward() -> None:
    _, sig = run("AssignBuffer", (t(3),))
    assert table(sig)[2:] == [
        ("BUFFER_MUTATION", "add", "total", L("assign.total")),
        ("USER_OUTPUT", "add", None, L("assign.total") + 1),
    ]
    # No in-place call on that line: the whole statement, without indentation.
    assert sig.outputs[0].source is not None and sig.outputs[0].source.column == col("assign.total", "self.")


def test_whole_line_specs_end_in_utf8_bytes_on_non_ascii_lines() -> None:
    # No finer node than the line: a reassigned buffer, a constant lifted from forward.
    for cls_name, tag, kind in (("AssignTotal", "uni.total", "BUFFER_MUTATION"), ("LiftedConstant", "uni.lifted", "CONSTANT_TENSOR")):
        _, sig = run(cls_name, (t(3),), file="unicode")
        spec = next(s for s in (*sig.inputs, *sig.outputs) if s.kind == kind)
        text = index("unicode").line_text(L(tag, "unicode"))
        assert spec.source == SourceLine(L(tag, "unicode"), col(tag, "self." if kind == "BUFFER_MUTATION" else "return", "unicode"), L(tag, "unicode"), len(text.rstrip().encode("utf-8")) + 1)


def test_constant_tensor_attribute() -> None:
    _, sig = run("ConstantTensor", (t(3),))
    assert table(sig)[0] == ("CONSTANT_TENSOR", "c_c", "c", L("const.c"))


def test_dynamic_shapes_and_ranges() -> None:
    mod = load("models")
    _, sig = run("Dynamic", (t(4, 3),), dynamic_shapes={"x": {0: mod.BATCH}})
    assert len(sig.ranges) == 1
    ((symbol, bounds),) = sig.ranges.items()
    assert bounds == (2, 64)
    x = sig.inputs[2]
    assert (x.kind, x.source.line if x.source else None) == ("USER_INPUT", L("dyn.x"))
    assert x.arg.meta is not None and x.arg.meta.shape == (symbol, 3)
    assert sig.outputs[0].arg.meta is not None and sig.outputs[0].arg.meta.shape == (symbol, 3)


def test_unbounded_range_is_none() -> None:
    ep, sig = run("Dynamic", (t(4, 3),), dynamic_shapes={"x": {0: Dim("open")}})
    (vr,) = ep.range_constraints.values()
    # torch 2.13 reports [0, int_oo] for an unconstrained Dim.
    assert list(sig.ranges.values()) == [(int(vr.lower), None)]
    assert int(vr.lower) in (0, 2)


def test_fractional_ranges_read_the_same_in_the_signature_and_the_bytes() -> None:
    # The signature used to truncate (2.5 -> 2) while the bytes rounded inward (-> 3),
    # so a hover from a cached program disagreed with one from a fresh export.
    import sympy
    from torch.utils._sympy.value_ranges import ValueRanges

    from exportlens.core.serde.encode import to_bytes
    from exportlens.core.serde.reader import read_program

    mod = load("models")
    ep, _ = run("Dynamic", (t(4, 3),), dynamic_shapes={"x": {0: mod.BATCH}})
    (symbol,) = ep.range_constraints
    ep.range_constraints[symbol] = ValueRanges(sympy.Rational(5, 2), sympy.Rational(129, 2))
    sig = extract_signature(ep, mod.Dynamic(), index=index("models"), args=(t(4, 3),), kwargs=None)
    assert sig.ranges == {str(symbol): (3, 64)}
    assert read_program(to_bytes(ep)).signature.ranges == sig.ranges


def test_kwargs_bind_to_their_parameters() -> None:
    args = (t(3),)
    kwargs = {"mask": t(3), "bias": t(3), "scale": 2.0}
    _, sig = run("Kwargs", args, kwargs)
    users = [(i.arg.name, i.arg.kind, i.source) for i in sig.inputs]
    line = L("kw.def")
    assert users == [
        ("x", "tensor", SourceLine(line, col("kw.def", "x,"), line, col("kw.def", "x,") + 1)),
        ("mask", "tensor", SourceLine(line, col("kw.def", "mask"), line, col("kw.def", "mask") + 4)),
        ("bias", "tensor", SourceLine(line, col("kw.def", "bias"), line, col("kw.def", "bias") + 4)),
        ("scale", "constant", SourceLine(line, col("kw.def", "scale"), line, col("kw.def", "scale") + 5)),
    ]
    assert sig.inputs[3].arg.value == 2.0 and sig.inputs[3].arg.meta is None


def test_var_positional_and_var_keyword() -> None:
    _, sig = run("VarArgs", (t(2), t(2), t(2)), {"k1": t(2)})
    cols = [i.source.column if i.source else None for i in sig.inputs]
    assert [i.arg.name for i in sig.inputs] == ["first", "rest_0", "rest_1", "k1"]
    assert all(i.source is not None and i.source.line == L("var.def") for i in sig.inputs)
    assert cols == [
        col("var.def", "first"),
        col("var.def", "rest"),
        col("var.def", "rest"),
        col("var.def", "extra"),
    ]


def test_submodule_targets_resolve_to_the_deepest_definition() -> None:
    _, sig = run("WithSubmodules", (t(2, 3),))
    lines = {i.target: i.source.line if i.source else None for i in sig.inputs if i.kind == "PARAMETER"}
    assert lines == {
        "block.w": L("block.w"),
        "block.norm.weight": L("block.norm"),
        "block.norm.bias": L("block.norm"),
        "layers.0.w": L("block.w"),
        "layers.0.norm.weight": L("block.norm"),
        "layers.0.norm.bias": L("block.norm"),
        "layers.1.w": L("block.w"),
        "layers.1.norm.weight": L("block.norm"),
        "layers.1.norm.bias": L("block.norm"),
        "head.weight": L("sub.head"),
        "head.bias": L("sub.head"),
    }


def test_scalar_inputs_and_symint_output() -> None:
    args = (t(4, 3), 3)
    kwargs = {"flag": True}
    ds = {"x": {0: Dim("b", min=2)}, "n": None, "flag": None}
    _, sig = run("ScalarAndSymInt", args, kwargs, dynamic_shapes=ds)
    line = L("scalar.def")
    assert [(i.arg.name, i.arg.kind, i.arg.value, i.source.column if i.source else None) for i in sig.inputs] == [
        ("x", "tensor", None, col("scalar.def", "x,")),
        ("n", "constant", 3, col("scalar.def", "n:")),
        ("flag", "constant", True, col("scalar.def", "flag")),
    ]
    assert all(i.source is not None and i.source.line == line for i in sig.inputs)
    (symbol,) = sig.ranges
    assert [(o.kind, o.arg.kind, o.arg.value) for o in sig.outputs] == [
        ("USER_OUTPUT", "tensor", None),
        ("USER_OUTPUT", "symint", symbol),
    ]
    assert sig.outputs[1].arg.meta is None
    assert [o.source.line if o.source else None for o in sig.outputs] == [L("scalar.return")] * 2


def test_inherited_forward_and_attributes() -> None:
    _, sig = run("Derived", (t(2, 3),))
    assert table(sig) == [
        ("PARAMETER", "p_bias", "bias", L("derived.bias")),
        ("PARAMETER", "p_proj_weight", "proj.weight", L("base.proj")),
        ("PARAMETER", "p_proj_bias", "proj.bias", L("base.proj")),
        ("USER_INPUT", "x", None, L("base.x")),
        ("USER_OUTPUT", "add", None, L("base.return")),
    ]


def test_output_in_a_multiline_return_and_output_computed_earlier() -> None:
    _, sig = run("TwoReturns", (t(3), t(3)))
    a, b = sig.outputs
    # `a` is computed before any return and forward has two: its own line.
    assert a.source is not None and a.source.line == L("two.a")
    # `y * 2` is computed inside the second return: the whole return statement.
    assert b.source is not None and (b.source.line, b.source.end_line) == (L("two.return2"), L("two.return2") + 3)


def test_returning_an_input_directly_uses_the_single_return() -> None:
    # The output is the placeholder itself: no trace at all; forward has one return.
    _, sig = run("Nested", ((t(2), t(2)), {"k": t(2)}))
    assert [(i.arg.name, i.source.line if i.source else None) for i in sig.inputs] == [
        ("pair_0", L("nested.def")),
        ("pair_1", L("nested.def")),
        ("opts_k", L("nested.def")),
    ]
    assert {i.source.column for i in sig.inputs[:2]} == {col("nested.def", "pair")}  # type: ignore[union-attr]
    assert sig.inputs[2].source is not None and sig.inputs[2].source.column == col("nested.def", "opts")


def test_token_inputs_and_outputs() -> None:
    _, sig = run("Printing", (t(2),))
    assert [(i.kind, i.arg.kind, i.source) for i in sig.inputs] == [
        ("TOKEN", "token", None),
        ("USER_INPUT", "tensor", sig.inputs[1].source),
    ]
    assert sig.inputs[1].source is not None and sig.inputs[1].source.line == L("print.x")
    assert [(o.kind, o.arg.kind) for o in sig.outputs] == [("TOKEN", "token"), ("USER_OUTPUT", "tensor")]
    assert sig.outputs[0].source is None


def test_custom_object_input() -> None:
    ep, sig = run("WithObject", (t(3),), file="custom_obj")
    obj = sig.inputs[0]
    assert (obj.kind, obj.arg.kind, obj.target) == ("CUSTOM_OBJ", "custom_obj", "lifted_custom_0")
    assert obj.arg.class_fqn == "exportlens_fixture_custom_obj.Tally"
    # The synthetic target names nothing; the object is found on the module by identity.
    assert obj.source is not None and obj.source.line == L("obj.tally", "custom_obj")
    assert table(sig)[1:] == [
        ("USER_INPUT", "x", None, L("obj.x", "custom_obj")),
        ("USER_OUTPUT", "bump", None, L("obj.return", "custom_obj")),
    ]


def test_model_class_outside_the_file_has_no_lines() -> None:
    module = torch.nn.Linear(3, 2)
    args = (t(1, 3),)
    ep = torch.export.export(module, args, strict=False).run_decompositions({})
    sig = extract_signature(ep, module, index=index("models"), args=args, kwargs=None)
    assert sig.torch_text() == str(ep.graph_signature)
    assert all(s.source is None for s in (*sig.inputs, *sig.outputs))


def test_graph_text_is_plain() -> None:
    ep, _ = run("Clean", (t(5, 4),))
    text = graph_text(ep)
    assert "def forward" in text and "\x1b[" not in text


# -- robustness of the small converters ---------------------------------------------------------


def test_unknown_argument_class_is_named_not_fatal() -> None:
    class WeirdArgument:
        name = "w"

    spec = extract._arg_spec(WeirdArgument(), None)
    assert (spec.kind, spec.name, spec.meta) == ("weirdargument", "w", None)


@pytest.mark.parametrize("val", [None, 3, "x", object(), torch.ScriptObject if hasattr(torch, "ScriptObject") else 1])
def test_tensor_meta_of_non_tensors_is_none(val: Any) -> None:
    assert tensor_meta(val) is None


def test_kind_names_pass_unknown_members_through() -> None:
    import enum

    class FutureKind(enum.Enum):
        PREFETCH = 1

    assert extract._kind_name(FutureKind.PREFETCH) == "PREFETCH"


def test_no_inputs_text_parity() -> None:
    run("NoInputs", ())


def test_name_fallback_when_flattening_disagrees(monkeypatch: pytest.MonkeyPatch) -> None:
    # If our pytree structure ever differs from torch's in_spec, placeholder names
    # (pair_0, opts_k) still lead to the parameters they were derived from.
    monkeypatch.setattr(specsource, "_leaf_params", lambda *a: None)
    _, sig = run("Nested", ((t(2), t(2)), {"k": t(2)}))
    assert [i.source.column if i.source else None for i in sig.inputs] == [
        col("nested.def", "pair"),
        col("nested.def", "pair"),
        col("nested.def", "opts"),
    ]
