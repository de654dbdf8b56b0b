"""``exportlens check`` on real model code: every ExportDB example shipped in
torch, and tiny-config transformers models. Where torch exports, the signature
must be torch's exactly; where it fails, an error at a line of the file."""

from __future__ import annotations

import importlib
import os
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
import torch._export.db.examples as exportdb

from tests.conftest import check_json, torch_text

EXPORTDB_DIR = Path(exportdb.__file__).parent
EXAMPLE_FILES = sorted(p for p in EXPORTDB_DIR.glob("*.py") if p.name != "__init__.py")


def _torch_signature(path: Path) -> str | None:
    module = importlib.import_module(f"torch._export.db.examples.{path.stem}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ep = torch.export.export(
                module.model,
                module.example_args,
                getattr(module, "example_kwargs", None),
                dynamic_shapes=getattr(module, "dynamic_shapes", None),
                strict=False,
            ).run_decompositions({})
        except Exception:
            return None
    return str(ep.graph_signature)


@pytest.fixture(scope="module")
def exportdb_report() -> dict[str, dict[str, Any]]:
    _, doc = check_json(str(EXPORTDB_DIR))
    return {os.path.realpath(f["path"]): f for f in doc["files"]}


def test_every_exportdb_example_is_checked(exportdb_report: dict[str, dict[str, Any]]) -> None:
    assert len(EXAMPLE_FILES) >= 30
    assert set(exportdb_report) == {os.path.realpath(p) for p in EXAMPLE_FILES}


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_exportdb_example_matches_torch(path: Path, exportdb_report: dict[str, dict[str, Any]]) -> None:
    entry = exportdb_report[os.path.realpath(path)]
    [target] = entry["targets"]
    expected = _torch_signature(path)
    n_lines = len(path.read_text().splitlines())
    if expected is None:
        assert target["status"] == "error"
        errors = [d for d in entry["diagnostics"] if d["severity"] == "error"]
        assert errors, "torch fails to export this example: exportlens must say why"
        assert all(1 <= d["line"] <= n_lines for d in errors)
        return
    assert target["status"] == "ok", entry["diagnostics"]
    assert torch_text(target["signature"]) == expected
    for spec in target["signature"]["inputs"]:
        if spec["kind"] == "USER_INPUT":
            assert spec["line"] is not None and 1 <= spec["line"] <= n_lines


TRANSFORMERS_FILE = '''
import torch
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel

import exportlens


def tiny_bert():
    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=37, max_position_embeddings=64)).eval()


def tiny_gpt2():
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100, n_positions=64)).eval()


def ids():
    return torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(0))


@exportlens.target
def bert():
    return tiny_bert(), (), {"input_ids": ids()}


@exportlens.target
def gpt2():
    return tiny_gpt2(), (), {"input_ids": ids(), "use_cache": False}


@exportlens.target
def gpt2_with_cache():
    return tiny_gpt2(), (), {"input_ids": ids()}
'''


@pytest.mark.slow
def test_transformers_models(tmp_path: Path) -> None:
    path = tmp_path / "hf_models.py"
    path.write_text(textwrap.dedent(TRANSFORMERS_FILE))
    _, doc = check_json(str(path), extra=("--timeout", "600"))
    [entry] = doc["files"]
    targets = {t["name"]: t for t in entry["targets"]}
    assert {n: t["status"] for n, t in targets.items()} == {"bert": "ok", "gpt2": "ok", "gpt2_with_cache": "error"}

    namespace: dict[str, Any] = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    for name in ("bert", "gpt2"):
        module, args, kwargs = namespace[name]()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = torch.export.export(module, args, kwargs).run_decompositions({})
        assert torch_text(targets[name]["signature"]) == str(ep.graph_signature)

    [diag] = [d for d in entry["diagnostics"] if d["target"] == "gpt2_with_cache"]
    assert diag["code"] == "unsupported-type"
    assert "DynamicCache" in diag["message"] and "use_cache=False" in diag["message"]
    # The cache is returned from transformers' code, so the factory's def line.
    def_line = path.read_text().splitlines().index("def gpt2_with_cache():") + 1
    assert diag["line"] == def_line
