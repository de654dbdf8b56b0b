"""Repeated layers' specs as one printed row (``core/model/repeated.py``)."""

from __future__ import annotations

from exportlens.core.model.repeated import MIN_GROUP, group
from exportlens.core.model.signature import ArgSpec, InputSpec, OutputSpec, SourceLine, TensorMeta


def _param(layer: int, name: str, shape: tuple[int, ...] = (8, 8), line: int = 10) -> InputSpec:
    target = f"model.layers.{layer}.{name}.weight"
    return InputSpec("PARAMETER", ArgSpec("tensor", "p_" + target.replace(".", "_"), meta=TensorMeta("bfloat16", shape, "cpu")), target, source=SourceLine(line))


def _rows(specs: list) -> list[tuple[int, str, str | None]]:
    return [(r.count, r.spec.arg.name, r.spec.target) for r in group(specs)]


def test_layers_that_differ_only_in_their_index_are_one_row_at_the_first() -> None:
    specs = [spec for i in range(80) for spec in (_param(i, "q_proj"), _param(i, "norm", (8,)))]
    user = InputSpec("USER_INPUT", ArgSpec("tensor", "input_ids", meta=TensorMeta("int64", (1, "s0"), "cpu")), None)
    assert _rows([_param(0, "embed"), *specs, user]) == [
        (1, "p_model_layers_0_embed_weight", "model.layers.0.embed.weight"),
        (80, "p_model_layers_{0..79}_q_proj_weight", "model.layers.{0..79}.q_proj.weight"),
        (80, "p_model_layers_{0..79}_norm_weight", "model.layers.{0..79}.norm.weight"),
        (1, "input_ids", None),
    ]


def test_a_different_shape_dtype_or_line_is_a_row_of_its_own() -> None:
    specs = [_param(i, "q_proj") for i in range(6)]
    specs[3] = _param(3, "q_proj", shape=(8, 16))  # a layer of another width
    specs[5] = _param(5, "q_proj", line=11)
    assert _rows(specs) == [
        (4, "p_model_layers_{0,1,2,4}_q_proj_weight", "model.layers.{0,1,2,4}.q_proj.weight"),
        (1, "p_model_layers_3_q_proj_weight", "model.layers.3.q_proj.weight"),
        (1, "p_model_layers_5_q_proj_weight", "model.layers.5.q_proj.weight"),
    ]


def test_small_models_keep_every_row() -> None:
    specs = [_param(i, "q_proj") for i in range(MIN_GROUP - 1)]
    assert [count for count, _, _ in _rows(specs)] == [1] * (MIN_GROUP - 1)


def test_mutation_outputs_group_by_target_and_name_their_first_and_last_node() -> None:
    meta = TensorMeta("bfloat16", (1, 8, 64, 128), "cpu")
    outs = [OutputSpec("BUFFER_MUTATION", ArgSpec("tensor", "index_put" + (f"_{2 * i}" if i else ""), meta=meta), f"layers.{i}.attention.cache_k", source=SourceLine(71)) for i in range(32)]
    assert _rows(outs) == [(32, "index_put…index_put_62", "layers.{0..31}.attention.cache_k")]
