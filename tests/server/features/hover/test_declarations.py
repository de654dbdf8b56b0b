"""Hover on declarations (issue 12, hover gaps): a submodule's ``class`` line, a
``Dim(...)`` declaration, the ``model = X()`` line, and the user's Dim names in
shapes and ranges, checked against real export results: the declaring file's own,
and a model module's view (``view_for``) of a package whose classes live in their
own modules."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from exportlens.core.model.views import view_for
from exportlens.server.features.hover import submodules
from exportlens.server.features.hover.collector import Anchors
from exportlens.server.markup import MARKDOWN
from tests.conftest import EXAMPLES, ROOT
from tests.server.features.hover.test_index import Doc, in_order

FIXTURES = ROOT / "tests" / "fixtures" / "index"


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Doc]:
    from exportlens.core.pipeline import Overrides, Pipeline

    project = tmp_path_factory.mktemp("hover") / "tinylm"
    shutil.copytree(ROOT / "tests" / "corpus" / "tinylm", project, ignore=shutil.ignore_patterns("__pycache__"))
    shapes = project.parent / "shapes"
    shutil.copytree(ROOT / "tests" / "corpus" / "shapes", shapes, ignore=shutil.ignore_patterns("__pycache__"))
    files = {
        "submodules": FIXTURES / "submodules.py",
        "factory_dims": FIXTURES / "factory_dims.py",
        "specialised": EXAMPLES / "dynamic_shapes.py",
        "make_gpt": project / "tinylm" / "factories.py",
        "shapes": shapes / "shapes" / "targets.py",
    }
    results = Pipeline(Overrides(timeout_s=120, cache=False)).run([str(p) for p in files.values()], jobs=1).results
    by_path = {Path(r.path).resolve(): r for r in results}
    out = {key: Doc(path, by_path[path.resolve()]) for key, path in files.items()}
    # The model modules, as the editor shows them: the view of the targets that import them.
    for key, module in (("attention", project / "tinylm" / "nn" / "layers" / "attention.py"), ("gpt", project / "tinylm" / "gpt.py")):
        out[key] = Doc(module, view_for(str(module), [out["make_gpt"].result]))
    return out


def test_a_submodule_class_line_lists_its_state_under_every_instance(docs: dict[str, Doc]) -> None:
    doc = docs["submodules"]
    attn = doc.hover(13, "Attn")
    assert doc.covered(attn) == "class Attn(nn.Module):"
    assert attn.text.startswith("**class Attn** · submodule of `Net` at `block.attn`, `extra.attn`")
    for row in (
        "p_block_attn_q_weight: PARAMETER target='block.attn.q.weight'",
        "p_extra_attn_q_bias: PARAMETER target='extra.attn.q.bias'",
        "b_block_attn_scale: BUFFER target='block.attn.scale' persistent=False  float32[16] cpu",
    ):
        assert row in attn.text
    assert "norm" not in attn.text and "steps" not in attn.text  # Block's and Net's own
    block = doc.hover(23, "Block")
    assert block.text.startswith("**class Block** · submodule of `Net` at `block`, `extra`")
    # Instance by instance: every `block.` row before the first `extra.` one.
    assert in_order(block.text, "target='block.attn.q.weight'", "target='block.norm.bias'", "target='block.attn.scale'", "target='extra.attn.q.weight'")
    assert "float32[16, 16] cpu" in block.text and "steps" not in block.text
    # The root's class line is the target's: the whole signature, not a submodule's.
    assert doc.hover(33, "Net").text.startswith("**Net** · export ok in ")
    # Every target that uses the class: `solo` exports a Block as its root.
    assert "**class Attn** · submodule of `solo` at `attn`" in attn.text
    assert "p_attn_q_weight: PARAMETER target='attn.q.weight'" in attn.text
    assert "---" in block.text and "**solo** · export ok" in block.text and "submodule of `solo`" not in block.text


def test_instance_paths_come_from_the_program_when_the_source_cannot_tell(docs: dict[str, Doc]) -> None:
    """Block defines no parameter of its own on a line of its own class once its
    LayerNorm is gone from the specs: torch's module records still place it."""
    doc = docs["submodules"]
    target = doc.target("Net")
    assert target.signature is not None
    anchors = Anchors(str(FIXTURES / "submodules.py"), doc.source, doc.result, MARKDOWN)
    from exportlens.server.features.hover.anchors import _TargetView

    view = _TargetView(anchors, target, target.signature)
    block = anchors.source.classes["Block"]
    assert sorted(submodules.instance_paths(view, block, {})) == ["block", "extra"]  # from `self.norm`'s specs
    no_norm = {"": "submodules.Net", "block": "submodules.Block", "extra": "submodules.Block", "other": "elsewhere.Block"}
    view.state.by_source.clear()  # the source says nothing now
    assert submodules.instance_paths(view, block, no_norm) == ["block", "extra"]
    assert submodules.instance_paths(view, block, {}) == []


def test_a_dim_declaration_shows_its_range_torchs_symbol_and_its_inputs(docs: dict[str, Doc]) -> None:
    doc = docs["submodules"]
    sig = doc.target("Net").signature
    assert sig is not None
    [symbol] = [s for s, n in sig.dim_names.items() if n == "batch"]
    call = doc.hover(44, "Dim")
    assert doc.covered(call) == 'Dim("batch", min=2, max=64)'
    assert call.text.startswith("**Dim `batch`** · `Net`")
    assert "batch ∈ [2, 64]" in call.text and f"batch is torch's {symbol}" in call.text
    assert "x: USER_INPUT  float32[batch, 16] cpu" in call.text
    variable = doc.hover(44, "batch")  # `batch = ...`: the variable's name too
    assert variable.text == call.text


def test_each_target_owns_the_dim_declared_in_its_own_lines(docs: dict[str, Doc]) -> None:
    doc = docs["factory_dims"]
    short, long_ = doc.hover(16, "Dim"), doc.hover(21, "Dim")
    assert short.text.startswith("**Dim `seq`** · `short`") and "seq ∈ [2, 64]" in short.text
    assert "`long`" not in short.text and "512" not in short.text
    assert long_.text.startswith("**Dim `seq`** · `long`") and "seq ∈ [2, 512]" in long_.text
    assert "float32[2, seq, 4] cpu" in long_.text


def test_a_specialised_dim_names_the_line_that_specialised_it(docs: dict[str, Doc]) -> None:
    doc = docs["specialised"]
    h = doc.hover(7, "Dim")
    assert h.text.startswith("**Dim `batch`** · `Reshaper` · torch specialised it")
    assert "line 12 · `if x.shape[0] == 4:` · this code specialises the dimension" in h.text
    assert "**`constraint-violation`** line 7" in h.text


def test_each_targets_specialised_dim_names_its_line_in_another_module(docs: dict[str, Doc]) -> None:
    doc = docs["shapes"]
    layers = (Path(doc.result.path).parent / "layers.py").read_text().split("\n")
    positional = doc.hover(doc.lines.index('@exportlens.target(dynamic_shapes={"x": {1: Dim("seq", max=64)}})') + 1, "Dim")
    assert positional.text.startswith("**Dim `seq`** · `positional` · torch specialised it") and "`pooled`" not in positional.text
    # The module's line (`x + self.pos` pins seq to the parameter's 8), named with its file.
    assert f"- layers.py:{layers.index('        return x + self.pos') + 1} · this code specialises the dimension" in positional.text
    pooled = doc.hover(doc.lines.index('@exportlens.target(dynamic_shapes={"x": {1: Dim("seq", max=32)}})') + 1, "Dim")
    assert pooled.text.startswith("**Dim `seq`** · `pooled` · torch specialised it") and "`positional`" not in pooled.text
    assert f"- layers.py:{layers.index('        return self.proj(x).reshape(2, 8 * 4)') + 1} · " in pooled.text
    # Failed before tracing (a malformed dynamic_shapes): no range, and the hover says why.
    batch = doc.hover(doc.lines.index('    dynamic_shapes={"pair": {0: Dim("batch")}},') + 1, "Dim")
    assert batch.text == "**Dim `batch`** · `pair_sum` · export error: torch recorded no range"


def test_the_model_line_shows_the_target(docs: dict[str, Doc]) -> None:
    doc = docs["submodules"]
    h = doc.hover(45, "model")
    assert doc.covered(h) == "model = Net()"
    assert h.text == doc.hover(33, "Net").text and "# inputs" in h.text
    assert "float32[batch, 16] cpu  line 40" in h.text and "batch ∈ [2, 64]" in h.text
    failed = docs["specialised"].hover(17, "model")
    assert failed.text.startswith("**Reshaper** · export error") and "constraint-violation" in failed.text
    assert docs["submodules"].at(46, "example_args") is None


def test_a_model_module_shows_its_classes_where_they_are(docs: dict[str, Doc]) -> None:
    attention = docs["attention"]
    line = attention.lines.index("class CausalSelfAttention(nn.Module):") + 1
    h = attention.hover(line, "CausalSelfAttention")
    assert h.text.startswith("**class CausalSelfAttention** · submodule of `make_gpt` at `h.0.attn`, `h.1.attn`")
    assert "p_h_0_attn_c_attn_weight: PARAMETER target='h.0.attn.c_attn.weight'  float32[24, 8] cpu" in h.text
    assert "target='h.1.attn.calls' persistent=True" in h.text and "BUFFER_MUTATION target='h.0.attn.calls'" in h.text
    gpt = docs["gpt"]
    block = gpt.hover(gpt.lines.index("class Block(nn.Module):") + 1, "Block")
    assert block.text.startswith("**class Block** · submodule of `make_gpt` at `h.0`, `h.1`")
    assert "target='h.0.ln_1.weight'" in block.text and "target='h.1.mlp." in block.text and "wte" not in block.text
    root = gpt.hover(gpt.lines.index("class GPT(nn.Module):") + 1, "GPT")
    assert root.text.startswith("**make_gpt** · export ok")


def test_markdown_names_dims_and_keeps_torchs_symbols() -> None:
    from exportlens.core.model.signature import ArgSpec, InputSpec, TensorMeta
    from exportlens.server.features.hover import text as md

    x = InputSpec("USER_INPUT", ArgSpec("tensor", "x", meta=TensorMeta("float32", ("s77", "2*s77 + 1", "s3"), "cpu")))
    n = InputSpec("USER_INPUT", ArgSpec("symint", "n", value="s77"))
    names = {"s77": "batch"}
    assert md.value_text(x, names) == "float32[batch, 2*batch + 1, s3] cpu"  # s3: a Dim.AUTO dim, no name
    assert md.value_text(n, names) == "symint batch"
    ranges: dict[str, tuple[int | None, int | None]] = {"s77": (2, 64), "s3": (2, None)}
    assert md.range_lines([x], ranges, names) == ["batch ∈ [2, 64]", "s3 ∈ [2, ∞]", "batch is torch's s77"]
    assert md.range_lines([x], ranges) == ["s77 ∈ [2, 64]", "s3 ∈ [2, ∞]"]  # no names: torch's, as before


def test_a_damaged_program_leaves_the_sources_answer_and_the_other_hovers(docs: dict[str, Doc]) -> None:
    from dataclasses import replace

    doc = docs["submodules"]
    damaged = replace(doc.result, targets=tuple(replace(t, program=b"\x93not a program") for t in doc.result.targets))
    again = Doc(FIXTURES / "submodules.py", damaged)
    # Both classes define parameters on their own lines: the source still places them.
    assert again.hover(23, "Block").text.startswith("**class Block** · submodule of `Net` at `block`, `extra`")
    assert again.hover(13, "Attn").text == doc.hover(13, "Attn").text
    assert again.hover(40, "x").text == doc.hover(40, "x").text
