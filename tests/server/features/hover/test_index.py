"""The hover index (``exportlens.server.features.hover``): what each position of a model file
shows, checked for content against real export results (one worker run for the
module) and against hand-built results for the edge cases a worker cannot produce."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from exportlens.core.model.results import Diagnostic, FileResult, TargetResult
from exportlens.core.model.signature import ArgSpec, InputSpec, OutputSpec, Signature, SourceLine, TensorMeta, spec_text
from exportlens.server.features.hover.index import HoverIndex, HoverText
from exportlens.server.markup import MARKDOWN, PLAIN
from tests.conftest import EXAMPLES, ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "index"
FILES = {
    "counter": EXAMPLES / "counter.py",
    "multi_targets": EXAMPLES / "multi_targets.py",
    "input_mutation": EXAMPLES / "input_mutation.py",
    "dynamic_ok": EXAMPLES / "dynamic_ok.py",
    "banned_mutations": EXAMPLES / "banned_mutations.py",
    "factory": EXAMPLES / "pyproject_target" / "pkg" / "models.py",
    "nested": FIXTURES / "nested.py",
    "unicode": FIXTURES / "unicode.py",
}


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class Doc:
    """A file, its real result and its index, addressed the way an editor does."""

    def __init__(self, path: Path, result: FileResult) -> None:
        self.path = str(path)
        self.source = path.read_text(encoding="utf-8")
        self.lines = self.source.split("\n")
        self.result = result
        self.index = HoverIndex.build(str(path), self.source, result, MARKDOWN)

    def col(self, line: int, needle: str, nth: int = 0) -> int:
        """UTF-16 column of the ``nth`` ``needle`` on 1-based ``line``."""
        text = self.lines[line - 1]
        at = -1
        for _ in range(nth + 1):
            at = text.index(needle, at + 1)
        return utf16(text[:at])

    def at(self, line: int, needle: str, nth: int = 0, offset: int = 0) -> HoverText | None:
        return self.index.hover(line - 1, self.col(line, needle, nth) + offset)

    def hover(self, line: int, needle: str, nth: int = 0, offset: int = 0) -> HoverText:
        found = self.at(line, needle, nth, offset)
        assert found is not None, f"no hover at {line}:{needle!r}"
        return found

    def covered(self, h: HoverText) -> str:
        """The text of the hover's range, cut in UTF-16 units as the client would."""
        raw = self.lines[h.line].encode("utf-16-le")
        return raw[2 * h.start : 2 * h.end].decode("utf-16-le")

    def target(self, name: str) -> TargetResult:
        return next(t for t in self.result.targets if t.name == name)


@pytest.fixture(scope="module")
def docs() -> dict[str, Doc]:
    from exportlens.core.pipeline import Overrides, Pipeline

    results = Pipeline(Overrides(timeout_s=120, cache=False)).run([str(p) for p in FILES.values()], jobs=1).results
    by_path = {Path(r.path).resolve(): r for r in results}
    return {key: Doc(path, by_path[path.resolve()]) for key, path in FILES.items()}


def in_order(text: str, *parts: str) -> bool:
    positions = [text.find(p) for p in parts]
    return all(p >= 0 for p in positions) and positions == sorted(positions)


# -- real results ------------------------------------------------------------------------


def as_plain(markdown: str) -> str:
    """What the plain-text writer says for a markdown hover: fence lines gone, no
    emphasis, the rule drawn as a line; backticks dropped on both sides (the code
    spans the writer makes are gone in plain text, a message's own stay)."""
    lines = [line for line in markdown.split("\n") if not re.fullmatch(r"`{3,}(text)?", line)]
    return "\n".join(PLAIN.rule() if line == "---" else line for line in lines).replace("**", "").replace("`", "")


def test_plain_text_hovers_say_what_markdown_says_without_its_syntax(docs: dict[str, Doc]) -> None:
    compared = 0
    for doc in docs.values():
        plain = HoverIndex.build(doc.path, doc.source, doc.result, PLAIN)
        assert plain.markup is PLAIN and doc.index.markup is MARKDOWN
        for line, text in enumerate(doc.lines):
            for column in range(utf16(text) + 1):
                md, pt = doc.index.hover(line, column), plain.hover(line, column)
                assert (md is None) == (pt is None), (doc.path, line, column)
                if md is None or pt is None:
                    continue
                assert (pt.line, pt.start, pt.end) == (md.line, md.start, md.end)
                assert "```" not in pt.text and "**" not in pt.text and "\n---\n" not in pt.text, pt.text
                assert pt.text.replace("`", "") == as_plain(md.text), (md.text, pt.text)
                compared += 1
    assert compared > 500  # every example's hovers, not a handful


def test_target_line_shows_the_whole_signature_in_torch_order(docs: dict[str, Doc]) -> None:
    doc = docs["counter"]
    target = doc.target("Counter")
    h = doc.hover(target.line, "Counter")
    assert doc.covered(h) == "class Counter(nn.Module):"
    assert h.text.startswith("**Counter** · export ok in ")
    assert target.signature is not None
    rows = [spec_text(s) for s in (*target.signature.inputs, *target.signature.outputs)]
    assert rows[0] == "b_steps: BUFFER target='steps' persistent=True"
    assert "b_scratch: BUFFER target='scratch' persistent=False" in rows
    assert in_order(h.text, "# inputs", *rows[: len(target.signature.inputs)], "# outputs", *rows[len(target.signature.inputs) :])
    assert "float32[1] cpu  line 10" in h.text and "```text" in h.text


def test_buffer_hover_on_use_literal_and_definition(docs: dict[str, Doc]) -> None:
    doc = docs["counter"]
    use = doc.hover(14, "steps")
    assert doc.covered(use) == "self.steps"
    assert "b_steps: BUFFER target='steps' persistent=True" in use.text
    assert "add: BUFFER_MUTATION target='steps'" in use.text
    assert "scratch" not in use.text
    literal = doc.hover(10, '"steps"', offset=2)
    assert doc.covered(literal) == '"steps"' and "b_steps: BUFFER" in literal.text
    definition = doc.hover(10, "torch.zeros")
    assert "b_steps: BUFFER" in definition.text
    scratch = doc.hover(11, "persistent")
    assert "b_scratch: BUFFER target='scratch' persistent=False  float32[3] cpu" in scratch.text
    assert "MUTATION" not in scratch.text


def test_inplace_call_line_shows_its_mutation(docs: dict[str, Doc]) -> None:
    doc = docs["counter"]
    h = doc.hover(14, "add_")
    assert doc.covered(h) == "self.steps.add_(1)"
    assert h.text.startswith("**in-place update** · `Counter`")
    assert in_order(h.text, "add: BUFFER_MUTATION target='steps'", "b_steps: BUFFER")


def test_forward_argument_in_def_and_body_and_return(docs: dict[str, Doc]) -> None:
    doc = docs["counter"]
    for line, nth in ((13, 0), (15, 0)):
        h = doc.hover(line, "x", nth)
        assert doc.covered(h) == "x"
        assert h.text.startswith("**x** · forward argument · `Counter`")
        assert "x: USER_INPUT  float32[3] cpu" in h.text
    ret = doc.hover(15, "return")
    assert doc.covered(ret) == "return x + self.steps"
    assert "add_1: USER_OUTPUT  float32[3] cpu" in ret.text and "BUFFER" not in ret.text
    assert doc.hover(15, "+").text == ret.text  # between two narrower anchors


def test_nothing_sensible_gives_none(docs: dict[str, Doc]) -> None:
    doc = docs["counter"]
    assert doc.at(9, "super") is None
    assert doc.at(1, "Buffer") is None
    assert doc.index.hover(11, 0) is None  # blank line
    assert doc.index.hover(500, 0) is None
    assert doc.at(13, "def") is None  # the `def` keyword is not the argument
    scaler = docs["multi_targets"]
    assert scaler.at(27, "factor") is None  # a float attribute is not in the signature
    assert scaler.at(27, "y") is None


def test_user_input_mutation_and_parameter_mutation(docs: dict[str, Doc]) -> None:
    doc = docs["input_mutation"]
    x = doc.hover(14, "x")
    assert "x: USER_INPUT " in x.text and "float32[2, 4] cpu" in x.text
    assert "mul: USER_INPUT_MUTATION target='x'" in x.text
    call = doc.hover(14, "mul_")
    assert doc.covered(call) == "x.mul_(2)"
    assert "mul: USER_INPUT_MUTATION target='x'" in call.text and "PARAMETER" not in call.text
    scale = doc.hover(16, "scale")
    assert "p_scale: PARAMETER target='scale'" in scale.text
    assert "mul_1: PARAMETER_MUTATION target='scale'" in scale.text
    assert "USER_INPUT_MUTATION" not in scale.text
    param_call = doc.hover(15, "mul_")
    assert "mul_1: PARAMETER_MUTATION target='scale'" in param_call.text


def test_symbolic_dims_show_their_ranges(docs: dict[str, Doc]) -> None:
    doc = docs["dynamic_ok"]
    sig = doc.target("Attention").signature
    assert sig is not None
    x_spec = next(s for s in sig.inputs if s.kind == "USER_INPUT")
    assert x_spec.arg.meta is not None
    batch, seq = (str(d) for d in x_spec.arg.meta.shape[:2])
    assert sig.dim_names == {batch: "batch", seq: "seq"}
    h = doc.hover(15, "x")
    # The user's Dim names, with torch's symbols kept at hand.
    assert "float32[batch, seq, 16] cpu" in h.text
    lo, hi = sig.ranges[seq]
    assert (lo, hi) == (2, 512) and "seq ∈ [2, 512]" in h.text
    assert f"batch ∈ [{sig.ranges[batch][0]}, 32]" in h.text
    assert f"batch is torch's {batch}" in h.text and f"seq is torch's {seq}" in h.text
    assert f"{seq} ∈" not in h.text and f"[{batch}," not in h.text
    qkv = doc.hover(15, "qkv")
    assert "p_qkv_weight: PARAMETER target='qkv.weight'  float32[48, 16] cpu" in qkv.text
    assert "proj" not in qkv.text and "torch's" not in qkv.text  # no symbol used there
    table = doc.hover(8, "Attention")
    assert "# ranges" in table.text and "seq ∈ [2, 512]" in table.text
    assert "float32[batch, seq, 16] cpu  line 14" in table.text and f"seq is torch's {seq}" in table.text


def test_several_targets_each_own_their_class(docs: dict[str, Doc]) -> None:
    doc = docs["multi_targets"]
    encoder = doc.hover(11, "Encoder")
    assert encoder.text.startswith("**encoder** · export ok")
    assert "p_embed_weight: PARAMETER target='embed.weight'" in encoder.text and "scaler" not in encoder.text
    assert doc.hover(10, "exportlens").text == encoder.text  # the decorator line
    factory = doc.hover(32, "scaler")
    assert factory.text.startswith("**scaler** · export ok") and "embed" not in factory.text
    assert doc.hover(21, "Scaler").text == factory.text  # the factory's module class
    sig = doc.target("scaler").signature
    assert sig is not None
    (symbol,) = sig.ranges
    assert sig.ranges[symbol][1] is None and f"n ∈ [{sig.ranges[symbol][0]}, ∞]" in factory.text  # Dim("n")
    assert f"n is torch's {symbol}" in factory.text
    bias = doc.hover(28, "bias", nth=1)
    assert bias.text.startswith("**bias** · forward argument · `scaler`")
    assert "bias: USER_INPUT  float32[1] cpu" in bias.text
    assert "`encoder`" in doc.hover(18, "x").text and "`scaler`" in doc.hover(27, "x").text


def test_failed_targets_show_status_and_errors(docs: dict[str, Doc]) -> None:
    doc = docs["banned_mutations"]
    h = doc.hover(10, "TransposeInPlace")
    assert h.text.startswith("**TransposeInPlace** · export error after ")
    assert "**`banned-mutation/input-metadata`** line 12:" in h.text and "`transpose_` on input" in h.text
    assert "banned-mutation/parameter" not in h.text and "# inputs" not in h.text
    assert doc.at(12, "x") is None  # no signature, no argument hovers
    trainable = doc.hover(17, "TrainableUpdate")
    assert "**`banned-mutation/parameter`** line 23:" in trainable.text
    mean = doc.hover(35, "mean")
    assert "c_mean: CONSTANT_TENSOR target='mean'  float32[3] cpu" in mean.text


def test_nested_submodules_list_every_instance(docs: dict[str, Doc]) -> None:
    doc = docs["nested"]
    weight = doc.hover(26, "weight")  # Block.forward's self.weight
    assert "p_blocks_0_weight: PARAMETER target='blocks.0.weight'" in weight.text
    assert "p_blocks_1_weight: PARAMETER target='blocks.1.weight'" in weight.text
    assert "head" not in weight.text and "inner" not in weight.text
    inner_w = doc.hover(14, "self.w")
    assert "target='blocks.0.inner.w'" in inner_w.text and "target='blocks.1.inner.w'" in inner_w.text
    assert "blocks.0.weight" not in inner_w.text
    inner = doc.hover(26, "inner")
    assert "target='blocks.0.inner.w'" in inner.text and "calls" not in inner.text
    blocks = doc.hover(36, "blocks")
    for target in ("blocks.0.weight", "blocks.1.inner.w", "blocks.1.calls"):
        assert f"target='{target}'" in blocks.text
    assert "BUFFER_MUTATION target='blocks.0.calls'" in blocks.text and "head" not in blocks.text
    head = doc.hover(33, "head")
    assert "p_head_weight: PARAMETER target='head.weight'  float32[2, 4] cpu" in head.text
    assert "blocks" not in head.text
    calls = doc.hover(25, "add_")
    assert "BUFFER_MUTATION target='blocks.0.calls'" in calls.text and "BUFFER_MUTATION target='blocks.1.calls'" in calls.text


def test_rebound_argument_is_no_longer_the_input(docs: dict[str, Doc]) -> None:
    doc = docs["nested"]
    assert doc.hover(37, "x", nth=1).text.startswith("**x** · forward argument")  # `x = block(x)`
    after = doc.hover(38, "x")  # after the rebinding: the enclosing return, not the input
    assert after.text.startswith("**return**") and "linear: USER_OUTPUT" in after.text
    assert doc.hover(38, "scale").text.startswith("**scale** · forward argument")


def test_factory_target_from_pyproject(docs: dict[str, Doc]) -> None:
    doc = docs["factory"]
    table = doc.hover(19, "make_classifier")
    assert table.text.startswith("**make_classifier** · export ok")
    assert doc.hover(9, "Classifier").text == table.text
    body = doc.hover(16, "body")
    assert "target='body.linear.weight'" in body.text and "head" not in body.text
    assert "features: USER_INPUT  float32[3, 6] cpu" in doc.hover(16, "features").text


def test_columns_are_utf16_after_non_ascii(docs: dict[str, Doc]) -> None:
    doc = docs["unicode"]
    line = 14  # `        y = "🚀🚀"; self.tête.add_(1); z = crème + x`
    text = doc.lines[line - 1]
    tete = doc.hover(line, "tête")
    assert doc.covered(tete) == "self.tête" and tete.start == utf16(text[: text.index("self.tête")])
    assert tete.start != text.index("self.tête")  # the emoji take two units each
    assert "BUFFER target='tête' persistent=True" in tete.text
    creme = doc.hover(line, "crème")
    assert doc.covered(creme) == "crème" and "USER_INPUT  float32[2] cpu" in creme.text
    x = doc.hover(line, "x", nth=0, offset=0)
    assert doc.covered(x) == "x" and x.text.startswith("**x** · forward argument")
    # Python's str index of `x` is two units short (one per emoji): that is the `+`.
    wrong = doc.index.hover(line - 1, text.index("+ x") + 2)
    assert wrong is not None and wrong.text.startswith("**in-place update**")
    assert doc.covered(doc.hover(13, "crème")) == "crème"
    literal = doc.hover(11, '"tête"')
    assert doc.covered(literal) == '"tête"'
    assert doc.hover(8, "Café").text.startswith("**Café** · export ok")


# -- hand-built results --------------------------------------------------------------------

SRC = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.register_buffer("n", torch.zeros(1))

    def forward(self, x):
        self.n.add_(1)
        x = self.fc(x)
        return x


model = Net()
"""


def t(dtype: str = "float32", *shape: int | str) -> TensorMeta:
    return TensorMeta(dtype, tuple(shape), "cpu")


def spec_in(kind: str, name: str, target: str | None, line: int | None, column: int = 1, shape: tuple[int | str, ...] = (2,), **kw: object) -> InputSpec:
    source = SourceLine(line, column) if line is not None else None
    return InputSpec(kind, ArgSpec("tensor", name, meta=t("float32", *shape)), target, source=source, **kw)  # type: ignore[arg-type]


def spec_out(kind: str, name: str, target: str | None, line: int | None, column: int = 1) -> OutputSpec:
    source = SourceLine(line, column) if line is not None else None
    return OutputSpec(kind, ArgSpec("tensor", name, meta=t("float32", 2)), target, source=source)


def net_signature(rows: int = 2) -> Signature:
    return Signature(
        inputs=(
            spec_in("PARAMETER", "p_fc_weight", "fc.weight", 8, 9, shape=(rows, 2)),
            spec_in("BUFFER", "b_n", "n", 9, 9, persistent=True),
            spec_in("USER_INPUT", "x", None, 11, 23, shape=("s0", 2)),
        ),
        outputs=(spec_out("BUFFER_MUTATION", "add", "n", 12, 9), spec_out("USER_OUTPUT", "linear", None, 14, 9)),
        ranges={"s0": (2, None)},
    )


def build(source: str, *targets: TargetResult, diagnostics: tuple[Diagnostic, ...] = ()) -> HoverIndex:
    return HoverIndex.build("/m.py", source, FileResult("/m.py", diagnostics, targets), MARKDOWN)


def find(index: HoverIndex, source: str, line: int, needle: str, nth: int = 0) -> HoverText | None:
    text = source.split("\n")[line - 1]
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    return index.hover(line - 1, utf16(text[:at]))


def test_handmade_anchors_and_narrowest_wins() -> None:
    index = build(SRC, TargetResult("Net", 5, "ok", 12.0, net_signature()))
    x_def = find(index, SRC, 11, "x")
    assert x_def is not None and "x: USER_INPUT  float32[s0, 2] cpu" in x_def.text and "s0 ∈ [2, ∞]" in x_def.text
    x_rhs = find(index, SRC, 13, "x", nth=1)  # `x = self.fc(x)`: still the input
    assert x_rhs is not None and x_rhs.text == x_def.text
    x_ret = find(index, SRC, 14, "x")  # rebound: the return's outputs
    assert x_ret is not None and x_ret.text.startswith("**return**") and "linear: USER_OUTPUT" in x_ret.text
    fc = find(index, SRC, 13, "fc")
    assert fc is not None and "p_fc_weight: PARAMETER target='fc.weight'  float32[2, 2] cpu" in fc.text
    assert find(index, SRC, 17, "model") is None and len(index) > 0
    # A `model = ...` target line (class from elsewhere): that line, and the class here.
    by_global = build(SRC, TargetResult("Net", 17, "ok", 12.0, net_signature()))
    line = find(by_global, SRC, 17, "Net")
    assert line is not None and (line.line, line.start, line.end) == (16, 0, 13) and "# inputs" in line.text
    cls = find(by_global, SRC, 5, "Net")
    assert cls is not None and cls.text == line.text


def test_broken_source_still_gives_target_line_and_spec_lines() -> None:
    broken = SRC.replace("x = self.fc(x)", "x = self.fc(x")
    index = build(broken, TargetResult("Net", 5, "ok", 3.0, net_signature()))
    table = find(index, broken, 5, "Net")
    assert table is not None and table.text.startswith("**Net** · export ok") and "# inputs" in table.text
    buffer_line = find(index, broken, 9, "register_buffer")
    assert buffer_line is not None and "b_n: BUFFER target='n' persistent=True" in buffer_line.text
    assert find(index, broken, 13, "fc") is None  # no AST: no `self.fc` anchors
    for text in ("", "\n\n", "def f(:\n", "\x00\x01"):
        assert build(text, TargetResult("Net", 5, "ok", 3.0, net_signature())).hover(4, 0) is None


def test_failed_target_without_signature() -> None:
    message = "Constraints violated (batch)!\nSuggested fixes:\n  batch = Dim('batch', max=8)\n"
    diags = (
        Diagnostic("constraint-violation", message, 13, 9, target="Net"),
        Diagnostic("mutation/buffer", "the program mutates buffer `n`", 12, 9, target="Net"),
        Diagnostic("export-error", "someone else's error", 3, target="Other"),
    )
    index = build(SRC, TargetResult("Net", 5, "error", 40.0), diagnostics=diags)
    h = find(index, SRC, 5, "class")
    assert h is not None and h.text.startswith("**Net** · export error after 40 ms")
    assert "**`constraint-violation`** line 13: Constraints violated (batch)!" in h.text
    assert "```text\nSuggested fixes:\n  batch = Dim('batch', max=8)\n```" in h.text
    assert "mutation/buffer" not in h.text and "someone else" not in h.text
    assert find(index, SRC, 13, "fc") is None and find(index, SRC, 11, "x") is None
    import_failed = build(SRC, TargetResult("Net", 5, "error"), diagnostics=(Diagnostic("import-error", "ModuleNotFoundError: No module named 'nope'", 1),))
    h2 = find(import_failed, SRC, 5, "Net")
    assert h2 is not None and "import-error" in h2.text and "No module named 'nope'" in h2.text


def test_a_class_exported_by_two_targets_shows_both() -> None:
    source = SRC + "\n\ndef make():\n    return Net(), (torch.randn(3, 2),)\n"
    first = TargetResult("Net", 5, "ok", 1.0, net_signature(rows=2))
    second = TargetResult("make", 20, "ok", 2.0, net_signature(rows=7))
    index = build(source, first, second)
    fc = find(index, source, 13, "fc")
    assert fc is not None
    sections = fc.text.split("\n\n---\n\n")
    assert len(sections) == 2
    assert "`Net`" in sections[0] and "float32[2, 2]" in sections[0]
    assert "`make`" in sections[1] and "float32[7, 2]" in sections[1]
    cls = find(index, source, 5, "Net")
    assert cls is not None and "**Net** · export ok" in cls.text and "**make** · export ok" in cls.text
    factory = find(index, source, 20, "make")
    assert factory is not None and "**make**" in factory.text and "**Net**" not in factory.text


def test_unknown_kinds_and_odd_payloads_display() -> None:
    sig = Signature(
        inputs=(
            InputSpec("FANCY_STATE", ArgSpec("tensor", "f_fc", meta=t("float8_e4m3fn", 3)), "fc.extra", source=SourceLine(8, 9)),
            InputSpec("USER_INPUT", ArgSpec("quantum", "x"), None, source=SourceLine(11, 23)),
            InputSpec("USER_INPUT", ArgSpec("constant", "flag", value=True), None, source=SourceLine(999, 1)),
            InputSpec("USER_INPUT", ArgSpec("symint", "n", value="s3"), None, source=SourceLine(11, 500, 10, 1)),
        ),
        outputs=(
            OutputSpec("WEIRD_OUTPUT", ArgSpec("tensor", "w", meta=t("float32")), "fc.extra", source=SourceLine(12, 9, 12, 23)),
            OutputSpec("USER_OUTPUT", ArgSpec("custom_obj", "o", class_fqn="__torch__.Foo"), None, source=SourceLine(14, 9)),
        ),
        ranges={"s3": (None, 4), "bad": (1,)},  # type: ignore[dict-item]
    )
    index = build(SRC, TargetResult("Net", 5, "ok", None, sig))
    table = find(index, SRC, 5, "Net")
    assert table is not None
    for row in ("f_fc: FANCY_STATE target='fc.extra'", "float8_e4m3fn[3] cpu", "x: USER_INPUT", "quantum", "flag: USER_INPUT", "= True",
                "n: USER_INPUT", "symint s3", "w: WEIRD_OUTPUT target='fc.extra'", "custom_obj __torch__.Foo", "s3 ∈ [-∞, 4]", "bad ∈ (1,)"):
        assert row in table.text
    assert table.text.startswith("**Net** · export ok\n")
    fc = find(index, SRC, 13, "fc")
    assert fc is not None and "f_fc: FANCY_STATE target='fc.extra'" in fc.text and "w: WEIRD_OUTPUT target='fc.extra'" in fc.text
    x = find(index, SRC, 11, "x")
    assert x is not None and "x: USER_INPUT  quantum" in x.text


def test_crlf_source_and_line_terminators() -> None:
    source = SRC.replace("\n", "\r\n")
    index = build(source, TargetResult("Net", 5, "ok", 1.0, net_signature()))
    h = find(index, SRC, 14, "return")
    assert h is not None and (h.line, h.start, h.end) == (13, 8, 16) and "linear: USER_OUTPUT" in h.text
