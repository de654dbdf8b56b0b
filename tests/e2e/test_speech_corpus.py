"""tests/corpus/speech: a Whisper-style encoder-decoder, an nn.TransformerEncoder
classifier, an LSTM tagger and a streaming model, classes in their own modules
(attention two packages down), four targets in one file. Every signature equals
torch's own; the one tensor attribute the user's code drops is reported at its
assignment with torch's full path, and torch's RNN bookkeeping is not reported."""

from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

from tests.conftest import ROOT, check_json, torch_text

CORPUS = ROOT / "tests" / "corpus" / "speech"
PKG = CORPUS / "speech"


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def _torch_signature(factory: str) -> str:
    sys.path.insert(0, str(CORPUS))
    try:
        fn = getattr(importlib.import_module("speech.targets"), factory)
        model, args = getattr(fn, "__wrapped__", fn)()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return str(torch.export.export(model, args, strict=False).run_decompositions({}).graph_signature)
    finally:
        sys.path.remove(str(CORPUS))


def _check() -> dict[str, Any]:
    code, doc = check_json(str(PKG / "targets.py"), cwd=CORPUS)
    assert code == 0
    [entry] = doc["files"]
    return entry


def test_every_signature_equals_torchs() -> None:
    entry = _check()
    targets = {t["name"]: t for t in entry["targets"]}
    assert list(targets) == ["whisper", "classifier", "tagger", "streaming"]
    for name, t in targets.items():
        assert t["status"] == "ok", name
        assert torch_text(t["signature"]) == _torch_signature(name), name
    # Whisper's attention is two packages down: its lines name that module.
    spec = next(s for s in targets["whisper"]["signature"]["inputs"] if s["target"] == "encoder.blocks.1.attn.query.weight")
    attention = PKG / "whisper" / "layers" / "attention.py"
    assert (CORPUS / spec["file"]).resolve() == attention.resolve()
    assert spec["line"] == _line_of(attention, "self.query = nn.Linear")


def test_a_nested_tensor_attribute_is_reported_at_its_assignment_and_rnns_are_not() -> None:
    entry = _check()
    caching = PKG / "whisper" / "layers" / "caching.py"
    # One diagnostic: the streaming model's `self.block.attn.last_k`; nothing for
    # the GRU and LSTM (`_flat_weights` is torch's own bookkeeping).
    [d] = entry["diagnostics"]
    assert (d["code"], d["target"]) == ("banned-mutation/tensor-attribute", "streaming")
    assert (CORPUS / d["file"]).resolve() == caching.resolve()
    assert d["line"] == _line_of(caching, "self.last_k = k")
    assert "`self.block.attn.last_k`" in d["message"]
    assert "`CachingAttention.__init__`" in d["message"] and "register_buffer('last_k'" in d["message"]
    assert d["related"][-1]["line"] == _line_of(PKG / "targets.py", "def streaming")


def test_whisper_saves_with_its_sparse_alignment_heads(tmp_path: Path) -> None:
    # exportlens.save (dumps with weights) refused Whisper's sparse buffer outright.
    import exportlens

    sys.path.insert(0, str(CORPUS))
    try:
        fn = importlib.import_module("speech.targets").whisper
        model, args = getattr(fn, "__wrapped__", fn)()
    finally:
        sys.path.remove(str(CORPUS))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(model, args, strict=False)
    exportlens.save(ep, tmp_path / "whisper.elp")
    loaded = exportlens.load(tmp_path / "whisper.elp")
    heads = loaded.constants["alignment_heads"]
    assert heads.layout == torch.sparse_coo and heads.is_coalesced()
    assert torch.equal(heads.to_dense(), model.alignment_heads.to_dense())
    torch.testing.assert_close(loaded.module()(*args), model(*args))
