"""Parity of ``extract_signature`` with torch on real code.

Every ExportDB example shipped with torch (``torch/_export/db/examples``) and two
tiny ``transformers`` models are exported the way the worker does it; the
torch-free signature must print exactly like ``ep.graph_signature``, carry the
node metadata, and point every user input at a ``forward`` parameter in the file.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import warnings
from types import ModuleType
from typing import Any

import pytest
import torch
from torch.utils._sympy.numbers import int_oo

from exportlens.core.export.extract import extract_signature, tensor_meta
from exportlens.core.model.signature import Signature
from exportlens.core.source.sourcemap import SourceIndex

try:
    import torch._export.db.examples as _examples

    EXAMPLES = sorted(info.name for info in pkgutil.iter_modules(_examples.__path__))
except ImportError:  # pragma: no cover - torch without ExportDB
    EXAMPLES = []

# Examples that torch itself cannot export non-strict in 2.13 (checked below: if one
# starts exporting, the test says so, so this list cannot silently go stale).
EXPECTED_EXPORT_FAILURES = {"dynamic_shape_round"}


def _index_for(path: str) -> SourceIndex:
    with open(path, encoding="utf-8") as f:
        return SourceIndex.build(f.read(), os.path.realpath(path))


def _export(model: torch.nn.Module, args: tuple, kwargs: dict, dynamic_shapes: Any) -> torch.export.ExportedProgram:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False)
        return ep.run_decompositions({})


def _check_against_graph(ep: torch.export.ExportedProgram, sig: Signature) -> None:
    """Same text as torch; each spec's kind/arg/metadata agrees with the graph."""
    assert sig.torch_text() == str(ep.graph_signature)
    nodes = {n.name: n for n in ep.graph.nodes}
    torch_specs = [*ep.graph_signature.input_specs, *ep.graph_signature.output_specs]
    for ours, theirs in zip([*sig.inputs, *sig.outputs], torch_specs, strict=True):
        assert ours.kind == theirs.kind.name and ours.target == theirs.target
        if ours.arg.kind == "tensor":
            assert ours.arg.meta is not None
            assert ours.arg.meta == tensor_meta(nodes[ours.arg.name].meta["val"])
        elif ours.arg.kind == "constant":
            assert ours.arg.value == theirs.arg.value or ours.arg.value == repr(theirs.arg.value)
    for sym, vr in ep.range_constraints.items():
        for ours_end, end in zip(sig.ranges[str(sym)], (vr.lower, vr.upper), strict=True):
            # None exactly for torch's infinite ends (unbacked symbols have -int_oo).
            assert ours_end == (None if end.is_infinite or abs(end) == int_oo else int(end))


def _model_class_in_file(model: torch.nn.Module, path: str) -> bool:
    owner = next(k for k in type(model).__mro__ if "forward" in vars(k))
    try:
        source = inspect.getsourcefile(owner)
    except TypeError:
        return False
    return source is not None and os.path.realpath(source) == os.path.realpath(path)


@pytest.mark.slow
@pytest.mark.parametrize("name", EXAMPLES)
def test_exportdb_example(name: str) -> None:
    mod: ModuleType = importlib.import_module(f"torch._export.db.examples.{name}")
    model = getattr(mod, "model", None)
    assert isinstance(model, torch.nn.Module), "every ExportDB example declares a `model` global"
    args: tuple = mod.example_args
    kwargs: dict = getattr(mod, "example_kwargs", None) or {}
    try:
        ep = _export(model, args, kwargs, getattr(mod, "dynamic_shapes", None))
    except Exception:
        # torch itself rejects these; test_check_exportdb checks that exportlens
        # then reports an error at a line of the example file.
        assert name in EXPECTED_EXPORT_FAILURES
        return
    assert name not in EXPECTED_EXPORT_FAILURES, "exports now: drop it from EXPECTED_EXPORT_FAILURES"

    path = str(mod.__file__)
    sig = extract_signature(ep, model, index=_index_for(path), args=args, kwargs=kwargs)
    _check_against_graph(ep, sig)

    if _model_class_in_file(model, path):
        n_lines = len(_index_for(path).lines())
        for spec in sig.inputs:
            if spec.kind == "USER_INPUT":
                assert spec.source is not None, f"{spec.arg.name} has no line"
                assert 1 <= spec.source.line <= n_lines
        # Everything else (state, outputs) resolves in these small files as well.
        assert [s.arg.name for s in (*sig.inputs, *sig.outputs) if s.source is None and s.kind != "TOKEN"] == []


def test_every_exportdb_example_is_covered() -> None:
    assert len(EXAMPLES) >= 30


# -- transformers ------------------------------------------------------------------------------


def _tiny_bert() -> torch.nn.Module:
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
    )
    return BertModel(config).eval()


def _tiny_gpt2() -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100, n_positions=64)
    return GPT2LMHeadModel(config).eval()


@pytest.mark.slow
@pytest.mark.parametrize("build", [_tiny_bert, _tiny_gpt2], ids=["bert", "gpt2"])
def test_transformers_model(build: Any) -> None:
    torch.manual_seed(0)
    model = build()
    kwargs = {"input_ids": torch.randint(0, 100, (2, 8)), "use_cache": False}
    ep = _export(model, (), kwargs, None)
    path = inspect.getsourcefile(type(model))
    assert path is not None
    sig = extract_signature(ep, model, index=_index_for(path), args=(), kwargs=kwargs)
    _check_against_graph(ep, sig)

    # torch lifts every parameter name, tied ones (GPT-2's lm_head/wte) included.
    params = [s for s in sig.inputs if s.kind == "PARAMETER"]
    names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    assert sorted(s.target for s in params) == sorted(names)
    assert len({id(p) for p in model.parameters()}) == len(list(model.parameters()))
    # Every submodule class of these models lives in the one modeling_*.py file.
    assert all(s.source is not None for s in params)

    users = {s.arg.name: s for s in sig.inputs if s.kind == "USER_INPUT"}
    assert list(users) == ["input_ids", "use_cache"]
    assert users["use_cache"].arg.kind == "constant" and users["use_cache"].arg.value is False
    assert all(u.source is not None for u in users.values())
    for out in sig.outputs:
        assert out.kind == "USER_OUTPUT" and out.source is not None
