"""Classification, messages, locating and signature checks, as pure tables."""

from __future__ import annotations

import pytest

from exportlens.core.export import analyze, signature_checks
from exportlens.core.export.analyze import ErrorFacts, Frame
from exportlens.core.model.signature import ArgSpec, InputSpec, OutputSpec, Signature, SourceLine
from exportlens.core.source.sourcemap import SourceIndex

RUNTIME = ("RuntimeError", "Exception", "BaseException", "object")


@pytest.mark.parametrize(
    ("type_names", "message", "error_type", "code"),
    [
        (("GuardOnDataDependentSymNode", *RUNTIME), "Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1))", None, "data-dependent"),
        (("UserError", *RUNTIME), "Could not extract specialized integer from data-dependent expression u0", None, "data-dependent"),
        (("UserError", *RUNTIME), "Constraints violated (n)! ...\nSuggested fixes:\n  n = 4", "CONSTRAINT_VIOLATION", "constraint-violation"),
        (("UserError", *RUNTIME), "Constraints violated (batch)!", None, "constraint-violation"),
        (RUNTIME, "a leaf Variable that requires grad is being used in an in-place operation.", None, "banned-mutation/parameter"),
        (("AssertionError", "Exception", "BaseException", "object"), "len(mutations) (0) != num_mutated_inp_runtime_indices (1)", None, "banned-mutation/input-metadata"),
        (RUNTIME, "Found <class 'Box'> in output, which is not a known type. If this type holds tensors, you need to register a pytree", None, "unsupported-type"),
        (("ValueError", "Exception"), "Unsupported input type <class 'Foo'>. Export only supports pytree containers", None, "unsupported-type"),
        (("Unsupported", "TorchDynamoException", *RUNTIME), "Call to `torch._dynamo.graph_break()`", None, "unsupported"),
        (("UserError", *RUNTIME), "Dynamic control flow is not supported at the moment.", "DYNAMIC_CONTROL_FLOW", "unsupported"),
        (RUNTIME, "something else entirely", None, "export-error"),
    ],
)
def test_classify(type_names: tuple[str, ...], message: str, error_type: str | None, code: str) -> None:
    assert analyze.classify(ErrorFacts(type_names, message, (), error_type)) == code


@pytest.mark.parametrize(
    ("type_names", "message", "eager"),
    [
        (("TypeError", "Exception"), "forward() missing 1 required positional argument: 'y'", True),
        (RUNTIME, "mat1 and mat2 shapes cannot be multiplied (3x3 and 5x5)", True),
        (RUNTIME, "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 0", True),
        (RUNTIME, "len(mutations) (0) != num_mutated_inp_runtime_indices (1)", False),
    ],
)
def test_is_eager_like(type_names: tuple[str, ...], message: str, eager: bool) -> None:
    assert analyze.is_eager_like(ErrorFacts(type_names, message, ())) is eager


def test_clean_message_drops_boilerplate_and_quoted_stacks() -> None:
    raw = (
        'Constraints violated (n)! For more information, run with TORCH_LOGS="+dynamic".\n'
        "  - You marked n as dynamic but your code specialized it to be a constant (4).\n"
        "Suggested fixes:\n  n = 4\n\n"
        "The following call raised this error:\n"
        '  File "/m.py", line 40, in forward\n    if x.sum() > 0:\n\n'
        "The error above occurred when calling torch.export.export. If you would like..."
    )
    cleaned = analyze.clean_message(raw)
    assert cleaned.startswith("Constraints violated (n)!")
    assert "TORCH_LOGS" not in cleaned and "/m.py" not in cleaned and "error above" not in cleaned
    assert "n = 4" in cleaned


ADVICE = "Tell export what holds with `torch._check(...)` (or `torch._check_is_size`), or use `torch.cond` to keep both branches."


@pytest.mark.parametrize(
    ("expr", "statement", "text"),
    [
        ("u0 > 0", "if x.item() > 0:", "`if x.item() > 0:` depends on the value of a tensor, not its shape: export cannot decide `u0 > 0`. " + ADVICE),
        ("u0 > 0", None, "export cannot decide `u0 > 0`: it depends on the value of a tensor, not its shape. " + ADVICE),
        (None, None, "export cannot branch on a data-dependent value. " + ADVICE),
    ],
)
def test_data_dependent_message(expr: str | None, statement: str | None, text: str) -> None:
    assert analyze.data_dependent_message(expr, statement) == text


def test_data_dependent_message_for_an_error_quotes_torch_after_the_advice() -> None:
    facts = ErrorFacts(RUNTIME, "Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1))", ())
    message = analyze.message_for("data-dependent", facts, "M")
    assert message.startswith(analyze.data_dependent_message("Eq(u0, 1)") + "\nCould not guard on")


SOURCE = '''import torch
from torch.export import Dim
batch = Dim("batch", min=2)
class M(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] == 4:
            return x.view(2, -1)
        return x
'''


def test_locate_prefers_deepest_frame_in_file() -> None:
    index = SourceIndex.build(SOURCE, "/p/m.py")
    facts = ErrorFacts(RUNTIME, "boom", (Frame("/p/m.py", 5, "forward"), Frame("/torch/x.py", 9), Frame("/p/m.py", 7, "forward"), Frame("/torch/y.py", 1)))
    where = analyze.locate(facts, "/p/m.py", index, SourceLine(4))
    assert (where.line, where.column, where.end_column) == (7, 13, 33)


def test_locate_uses_frames_quoted_in_the_message() -> None:
    index = SourceIndex.build(SOURCE, "/p/m.py")
    facts = ErrorFacts(RUNTIME, 'User Stack:\n  File "/p/m.py", line 6, in forward\n    if ...', ())
    assert analyze.locate(facts, "/p/m.py", index, SourceLine(4)).line == 6


def test_locate_uses_truncated_caused_by_paths() -> None:
    index = SourceIndex.build(SOURCE, "/work/p/m.py")
    facts = ErrorFacts(RUNTIME, "Caused by: x = 1  # rk/p/m.py:8 in forward (foo.py:3 in bar)", ())
    assert analyze.locate(facts, "/work/p/m.py", index, SourceLine(4)).line == 8


def test_locate_falls_back_to_target_line() -> None:
    index = SourceIndex.build(SOURCE, "/p/m.py")
    assert analyze.locate(ErrorFacts(RUNTIME, "no frames", ()), "/p/m.py", index, SourceLine(4)).line == 4


def test_constraint_violation_points_at_dim_declaration() -> None:
    index = SourceIndex.build(SOURCE, "/p/m.py")
    where, related = analyze.constraint_location(ErrorFacts(("UserError",), "Constraints violated (batch)!", ()), index, "/p/m.py")
    assert where is not None and where.line == 3


def _arg(name: str) -> ArgSpec:
    return ArgSpec("tensor", name)


def _check(sig: Signature, placeholders: list[str], outputs: list[str]) -> list[tuple[str, str]]:
    found = signature_checks.signature_diagnostics(
        sig,
        placeholders=placeholders,
        graph_outputs=outputs,
        parameters=["w"],
        buffers=["steps"],
        constants=["c"],
        target="M",
        fallback=SourceLine(4),
    )
    return [(d.code, d.message) for d in found]


GOOD = Signature(
    inputs=(InputSpec("PARAMETER", _arg("p_w"), "w"), InputSpec("BUFFER", _arg("b_steps"), "steps", True), InputSpec("USER_INPUT", _arg("x"))),
    outputs=(OutputSpec("BUFFER_MUTATION", _arg("add"), "steps"), OutputSpec("USER_OUTPUT", _arg("mul"))),
)


def test_a_sound_signature_has_no_unknown_kinds() -> None:
    assert _check(GOOD, ["p_w", "b_steps", "x"], ["add", "mul"]) == []


@pytest.mark.parametrize(
    ("sig", "placeholders", "outputs", "code", "fragment"),
    [
        (Signature((InputSpec("MYSTERY", _arg("m")),), ()), ["m"], [], "unknown-input-kind", "kind `MYSTERY`"),
        (Signature((InputSpec("USER_INPUT", _arg("x")),), ()), ["x", "orphan"], [], "unknown-input-kind", "`orphan` is covered by no input spec"),
        (Signature((InputSpec("PARAMETER", _arg("p_z"), "z"),), ()), ["p_z"], [], "unknown-input-kind", "target `z`"),
        (Signature((InputSpec("BUFFER", _arg("b"), "nope", True),), ()), ["b"], [], "unknown-input-kind", "target `nope`"),
        (Signature((), (OutputSpec("GRADIENT_TO_NOWHERE", _arg("g")),)), [], ["g"], "unknown-output-kind", "kind `GRADIENT_TO_NOWHERE`"),
        (Signature((), (OutputSpec("USER_OUTPUT", _arg("y")),)), [], ["y", "stray"], "unknown-output-kind", "`stray` is covered by no output spec"),
        (Signature((), (OutputSpec("BUFFER_MUTATION", _arg("a"), "w"),)), [], ["a"], "unknown-output-kind", "target `w`"),
        (Signature((InputSpec("USER_INPUT", _arg("x")),), (OutputSpec("USER_INPUT_MUTATION", _arg("a"), "y"),)), ["x"], ["a"], "unknown-output-kind", "target `y`"),
    ],
)
def test_unknown_kinds(sig: Signature, placeholders: list[str], outputs: list[str], code: str, fragment: str) -> None:
    found = _check(sig, placeholders, outputs)
    assert [c for c, _ in found] == [code], found
    assert fragment in found[0][1]


def test_mutation_diagnostics_point_at_the_spec_line() -> None:
    sig = Signature(
        (),
        (
            OutputSpec("BUFFER_MUTATION", _arg("add"), "steps", SourceLine(13, 9)),
            OutputSpec("USER_INPUT_MUTATION", _arg("mul"), "x", SourceLine(14, 9)),
            OutputSpec("PARAMETER_MUTATION", _arg("mul_1"), "w", None),
            OutputSpec("USER_OUTPUT", _arg("o")),
        ),
    )
    found = signature_checks.mutation_diagnostics(sig, "M", SourceLine(4))
    assert [(d.code, d.line, d.severity) for d in found] == [
        ("mutation/buffer", 13, "information"),
        ("mutation/user-input", 14, "warning"),
        ("mutation/parameter", 4, "warning"),
    ]


def test_tensor_attribute_warning_points_at_each_assignment() -> None:
    src = "class M:\n    def __init__(self):\n        self.mean = 0\n    def forward(self, x):\n        self.mean = x\n        return x\n"
    index = SourceIndex.build(src, "/m.py")
    warnings = ["The tensor attributes self.mean, self.other were assigned during export. Such attributes must be registered as buffers"]
    found = signature_checks.tensor_attribute_diagnostics(warnings, index, "M", SourceLine(1))
    assert [(d.code, d.line) for d in found] == [("banned-mutation/tensor-attribute", 5), ("banned-mutation/tensor-attribute", 1)]
    assert signature_checks.tensor_attribute_diagnostics(["unrelated warning"], index, "M", SourceLine(1)) == []


# -- messages passed through from torch get the user's context (issue 11, fix 6)

_BATCH_ONE = (
    "Constraints violated (batch)! For more information, run with TORCH_LOGS=\"+dynamic\".\n"
    "  - You marked batch as dynamic but your code specialized it to be a constant (1).\n"
    "Suggested fixes:\n  batch = 1\n"
)


@pytest.mark.parametrize(
    ("message", "expected", "absent"),
    [
        (_BATCH_ONE, ["suggested fix `batch = 1` would remove the dynamic dim `batch`", "example input with a size >= 2"], []),
        (_BATCH_ONE.replace("(1)", "(4)").replace("batch = 1", "batch = 4"), ["`batch = 4` would remove the dynamic dim", "`Dim.STATIC`"], ["size >= 2"]),
        # A suggested range keeps the dim dynamic: nothing to warn about.
        ("Constraints violated (n)!\nSuggested fixes:\n  n = Dim('n', max=32)\n", [], ["would remove"]),
    ],
)
def test_constraint_violation_says_what_torchs_suggested_fix_does(message: str, expected: list[str], absent: list[str]) -> None:
    text = analyze.message_for("constraint-violation", ErrorFacts(("UserError", *RUNTIME), message, (), "CONSTRAINT_VIOLATION"), "m")
    assert text.startswith("the declared dynamic_shapes are violated")
    assert all(e in text for e in expected) and not any(a in text for a in absent)


@pytest.mark.parametrize(
    ("found", "cache"),
    [
        ("transformers.cache_utils.DynamicCache", "DynamicCache"),
        ("transformers.cache_utils.EncoderDecoderCache", "EncoderDecoderCache"),
        ("mypkg.Box", None),
        ("mypkg.LRUCache", None),  # not a transformers cache: the generic pytree advice
    ],
)
def test_a_returned_transformers_cache_is_told_use_cache_false(found: str, cache: str | None) -> None:
    message = f"Found <class '{found}'> in output, which is not a known type. If this type holds tensors, you need to register a pytree"
    text = analyze.message_for("unsupported-type", ErrorFacts(RUNTIME, message, ()), "m")
    if cache is None:
        assert "returns its key/value cache" not in text and "register_pytree_node" in text
    else:
        assert text.startswith(f"the model returns its key/value cache (`{cache}`)") and "`use_cache=False`" in text


def test_numpy_under_fake_tensors_names_the_line() -> None:
    facts = ErrorFacts(RUNTIME, ".numpy() is not supported for tensor subclasses.", ())
    text = analyze.message_for("export-error", facts, "m", statement="n = x.numpy()")
    assert text.startswith("`n = x.numpy()` calls `.numpy()`") and "fake tensors" in text
    assert analyze.message_for("export-error", facts, "m").startswith("the model calls `.numpy()`")


def test_data_dependent_message_inside_a_library_names_both_lines() -> None:
    text = analyze.data_dependent_message("Eq(u0, 1)", statement="return gate(y)", library=("fancylib/__init__.py", 5, "if x.sum() > 0:"))
    assert text.startswith("`return gate(y)` calls into a library whose check `if x.sum() > 0:` (fancylib/__init__.py:5) depends on the value of a tensor")
    assert "`Eq(u0, 1)`" in text and "torch._check" in text
    plain = analyze.data_dependent_message("Eq(u0, 1)", statement="if x.sum() > 0:")
    assert plain.startswith("`if x.sum() > 0:` depends on the value of a tensor")


def test_a_long_message_is_cut_before_torchs_suggested_fixes_not_through_them() -> None:
    """The Dim fix applies the whole "Suggested fixes:" block; a cut through it loses a dim."""
    guards = "\n".join(f"  - Not all values of a in the specified range satisfy the generated guard number {i}" for i in range(40))
    message = f"Constraints violated (a, b)!\n{guards}\nSuggested fixes:\n  a = Dim('a', max=8)\n  b = Dim('b', max=9)"
    cleaned = analyze.clean_message(message)
    assert len(cleaned) <= 1200 and "…" in cleaned
    assert cleaned.endswith("Suggested fixes:\n  a = Dim('a', max=8)\n  b = Dim('b', max=9)")
    assert analyze.clean_message("x" * 3000) == "x" * 1199 + "…"
