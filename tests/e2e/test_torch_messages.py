"""Messages torch passes through, on real models through the CLI: the user's
context is added (what torch's suggested fix would do, a returned Hugging Face
cache, ``.numpy()`` under fake tensors at its line)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import check_json

MODELS = '''\
import torch
from torch.export import Dim
from transformers import GPT2Config, GPT2LMHeadModel

import exportlens


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 2


class ToNumpy(torch.nn.Module):
    def forward(self, x):
        total = float(x.numpy().sum())
        return x + total


@exportlens.target(dynamic_shapes={"x": {0: Dim("batch")}})
def batch_of_one():
    return Scale(), (torch.randn(1, 3),)


@exportlens.target
def to_numpy():
    return ToNumpy(), (torch.randn(2, 3),)


@exportlens.target
def gpt2():
    # A tiny GPT-2 from a config (no download); use_cache stays at its default.
    config = GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=32, n_positions=16)
    return GPT2LMHeadModel(config).eval(), (torch.randint(0, 32, (2, 5)),)
'''


def test_torch_messages_get_the_users_context(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    _, doc = check_json("models.py", cwd=tmp_path, extra=("--no-cache",))
    [entry] = doc["files"]
    by_target = {d["target"]: d for d in entry["diagnostics"]}
    assert set(by_target) == {"batch_of_one", "to_numpy", "gpt2"}

    batch = by_target["batch_of_one"]
    assert batch["code"] == "constraint-violation"
    assert "`batch = 1` would remove the dynamic dim `batch`" in batch["message"]
    assert "example input with a size >= 2" in batch["message"]

    numpy = by_target["to_numpy"]
    assert numpy["line"] == MODELS.splitlines().index("        total = float(x.numpy().sum())") + 1
    assert numpy["message"].startswith("`total = float(x.numpy().sum())` calls `.numpy()`")
    assert "fake tensors" in numpy["message"]

    gpt2 = by_target["gpt2"]
    assert gpt2["code"] == "unsupported-type"
    assert gpt2["message"].startswith("the model returns its key/value cache (`DynamicCache`)")
    assert "`use_cache=False`" in gpt2["message"]
