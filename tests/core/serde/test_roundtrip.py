"""Round trips of real programs: every ExportDB example torch exports, tiny BERT and GPT-2.

``loads(dumps(ep))`` must give the same signature text and the same outputs, ``dumps``
must be canonical (byte-identical twice and across two exports), and
``read_program`` must give the same signature text without importing torch.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any

import msgpack
import pytest
import torch

from exportlens import program as P
from exportlens.core.serde import schema

pytestmark = pytest.mark.slow
warnings.filterwarnings("ignore", category=FutureWarning)


def _export(model: Any, args: tuple, kwargs: dict | None = None, dynamic_shapes: Any = None) -> Any:
    return torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False).run_decompositions({})


def _exportdb_cases() -> dict[str, Callable[[], tuple[Any, tuple, dict]]]:
    from torch._export.db.examples import all_examples

    cases = {}
    for name, case in sorted(all_examples().items()):

        def make(case: Any = case) -> tuple[Any, tuple, dict, Any]:
            return copy.deepcopy(case.model), case.example_args, case.example_kwargs or {}, case.dynamic_shapes

        cases[name] = make
    return cases


def _bert() -> tuple[Any, tuple, dict, Any]:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, max_position_embeddings=64)
    return BertModel(cfg).eval(), (torch.randint(0, 100, (2, 8)),), {}, None


def _gpt2() -> tuple[Any, tuple, dict, Any]:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100, n_positions=64)
    return GPT2LMHeadModel(cfg).eval(), (torch.randint(0, 100, (2, 8)),), {"use_cache": False}, None


# ExportDB documents cases torch itself does not export; they have nothing to round-trip.
TORCH_CANNOT_EXPORT = {"dynamic_shape_round"}
CASES: dict[str, Callable[[], tuple[Any, tuple, dict, Any]]] = {
    name: make for name, make in {**_exportdb_cases(), "tiny_bert": _bert, "tiny_gpt2": _gpt2}.items() if name not in TORCH_CANNOT_EXPORT
}


@pytest.mark.parametrize("name", sorted(TORCH_CANNOT_EXPORT))
def test_excluded_cases_really_fail_to_export(name: str) -> None:
    model, args, kwargs, dyn = _exportdb_cases()[name]()
    with pytest.raises(Exception):  # noqa: B017 - any failure: the point is that torch refuses
        _export(model, args, kwargs, dyn)
_EXPORTED: dict[str, Any] = {}


def _get(name: str) -> tuple[Any, tuple, dict]:
    if name not in _EXPORTED:
        model, args, kwargs, dyn = CASES[name]()
        _EXPORTED[name] = (_export(model, args, kwargs, dyn), args, kwargs)
    return _EXPORTED[name]


def _clone(x: Any) -> Any:
    return torch.utils._pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, x)


def _state(ep: Any) -> dict[str, Any]:
    return {k: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in {**ep.state_dict, **ep.constants}.items()}


def _outputs(ep: Any, weights: dict[str, Any] | None, args: tuple, kwargs: dict) -> Any:
    return ep.module()(*_clone(args), **_clone(kwargs))


@pytest.mark.parametrize("name", sorted(CASES))
def test_roundtrip(name: str) -> None:
    ep, args, kwargs = _get(name)
    state = _state(ep)
    data = P.dumps(ep)
    assert P.dumps(ep) == data, "dumps is not deterministic"
    ep2 = P.loads(data, weights=state)
    assert str(ep2.graph_signature) == str(ep.graph_signature)
    expected = _outputs(copy.deepcopy(ep), None, args, kwargs)
    torch.testing.assert_close(_outputs(ep2, None, args, kwargs), expected)
    assert P.read_program(data).signature.torch_text() == str(ep.graph_signature)


@pytest.mark.parametrize("name", ["tiny_bert", "tiny_gpt2", "cond_operands", "dynamic_shape_map", "user_input_mutation", "dynamic_shape_slicing"])
def test_two_exports_give_same_bytes(name: str) -> None:
    ep, _, _ = _get(name)
    model, args, kwargs, dyn = CASES[name]()
    if name.startswith("tiny"):
        model.load_state_dict(_get(name)[0].module().state_dict(), strict=False)
    again = _export(model, args, kwargs, dyn)
    assert P.dumps(again) == P.dumps(ep)


@pytest.mark.parametrize("name", ["tiny_bert", "tiny_gpt2", "model_attr_mutation"])
def test_weights_in_bytes_and_save_load(name: str, tmp_path: Any) -> None:
    ep, args, kwargs = _get(name)
    path = tmp_path / "prog.elp"
    P.save(ep, path)
    ep2 = P.load(path)
    assert str(ep2.graph_signature) == str(ep.graph_signature)
    torch.testing.assert_close(_outputs(ep2, None, args, kwargs), _outputs(copy.deepcopy(ep), None, args, kwargs))
    assert P.read_program(path.read_bytes()).has_weights


def test_a_program_of_fake_weights_saves_without_them_and_says_why_not_with(tmp_path: Any) -> None:
    """A model built under a fake mode (as exportlens builds large weights): its program
    has no values to save, and ``save`` says so instead of a generic error."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        model = torch.nn.Linear(4, 2)
    ep = _export(model, (torch.randn(3, 4),))
    assert P.read_program(P.dumps(ep)).signature.torch_text() == str(ep.graph_signature)
    with pytest.raises(ValueError, match=r"weight 'bias' has no values \(a fake tensor of shape \[2\]\).*weights = \"real\""):
        P.save(ep, tmp_path / "fake.elp")
    assert not (tmp_path / "fake.elp").exists()


def test_weights_from_module_and_missing_weights() -> None:
    ep, args, kwargs = _get("tiny_bert")
    data = P.dumps(ep)
    ep2 = P.loads(data, weights=ep)
    torch.testing.assert_close(ep2.module()(*args), ep.module()(*args))
    with pytest.raises(ValueError, match="weights missing"):
        P.loads(data)


def test_read_program_does_not_import_torch(tmp_path: Any) -> None:
    ep, _, _ = _get("tiny_gpt2")
    path = tmp_path / "gpt2.elp"
    path.write_bytes(P.dumps(ep))
    code = (
        "import sys\n"
        "from exportlens.program import read_program\n"
        f"pm = read_program(open({str(path)!r}, 'rb').read())\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert len(pm.nodes) > 50 and any(n.source for n in pm.nodes)\n"
        "sys.stdout.write(pm.signature.torch_text())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == str(ep.graph_signature)


def test_hostile_operator_and_expression_refused() -> None:
    ep, _, _ = _get("dynamic_shape_slicing")
    from exportlens.core.serde import codec
    from exportlens.core.serde.expressions import parse_expr
    from exportlens.core.serde.validate import check_target

    for bad in ["torch.os.system", "builtins.eval", "torch.hub.load", "_operator.attrgetter", "#x"]:
        with pytest.raises(codec.SchemaError):
            check_target(bad)
    check_target("torch.ops.aten.add.Tensor")
    check_target("_operator.getitem")
    for bad in ["__import__('os').system('x')", "s0.__class__", "9**9**9**9", "open('x')"]:
        with pytest.raises(codec.SchemaError):
            parse_expr(bad)
    parse_expr("Add(Symbol('s0', positive=True, integer=True), Integer(1))")
    doc = codec.unpack(P.dumps(ep))
    strings = doc[schema.P_STRINGS]
    op = next(n for n in doc[schema.P_GRAPH][0] if n[schema.N_OP] == schema.OP_CALL_FUNCTION)
    strings[op[schema.N_TARGET]] = "torch.os.system"
    with pytest.raises(codec.SchemaError, match="not a torch op"):
        P.loads(msgpack.packb(doc), weights=ep)
    ep, _, _ = _get("cond_operands")  # dynamic: its shapes hold expressions
    doc = codec.unpack(P.dumps(ep))
    expr = next(i for i, t in enumerate(doc[schema.P_STRINGS]) if t.startswith("Symbol("))
    doc[schema.P_STRINGS][expr] = "__import__('os').system('true')"
    with pytest.raises(codec.SchemaError):
        P.loads(msgpack.packb(doc), weights=ep)


def test_every_torch_kind_has_a_name_in_the_torch_free_model() -> None:
    from torch.export import graph_signature as gs

    from exportlens.core.model.signature import INPUT_KINDS, OUTPUT_KINDS

    assert set(gs.InputKind.__members__) <= set(INPUT_KINDS)
    assert set(gs.OutputKind.__members__) <= set(OUTPUT_KINDS)


def test_payload_is_at_most_half_of_torch_json() -> None:
    """The payload is compact: well under half of torch's own JSON for a real model."""
    from torch._export.serde.serialize import serialize

    ep, _, _ = _get("tiny_bert")
    assert len(P.dumps(ep)) <= 0.5 * len(serialize(ep).exported_program)


def test_sparse_weights_round_trip() -> None:
    # Whisper keeps alignment_heads as a sparse buffer; dumps(weights=True) refused it.
    from . import models

    ep = models.program("sparse")
    ep2 = P.loads(P.dumps(ep, weights=True))
    coo, coo2 = ep.constants["heads"], ep2.constants["heads"]
    assert coo2.layout == torch.sparse_coo and coo2.is_coalesced() == coo.is_coalesced() is False
    assert torch.equal(coo2._indices(), coo._indices()) and torch.equal(coo2._values(), coo._values())
    csr, csr2 = ep.constants["mix"], ep2.constants["mix"]
    assert csr2.layout == torch.sparse_csr
    for part in ("crow_indices", "col_indices", "values"):
        assert torch.equal(getattr(csr2, part)(), getattr(csr, part)())
    x = torch.full((2, 3), 0.5)
    torch.testing.assert_close(ep2.module()(x), ep.module()(x))
