"""Tensor attributes that are no buffers, through the real command (issue 22).

- A block used twice (``nn.ModuleList([Block(), Block()])``) that assigns a tensor
  attribute and mutates a buffer: one diagnostic per line of code for each, naming
  every instance, the attribute's path as Python (``self.blocks[0].cache``).
- A KV cache kept as a plain tensor attribute and written in place (Meta's reference
  Llama): torch fails on it; one error per attribute at the line that writes it (both
  layers' ``cache_k`` at the ``cache_k`` line, ``cache_v`` at its own), no warning
  that the update is "silently dropped", and the register-buffer fix makes it export.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from exportlens.core.fixes import apply, fixes_for
from exportlens.core.model.results import Diagnostic, FileResult
from tests.conftest import run_cli
from tests.workspaces import MYMODELS_NET, mymodels_workspace

BLOCK = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.cache = torch.zeros(2, 8)
            self.register_buffer("steps", torch.zeros(1))

        def forward(self, x):
            y = self.fc(x)
            self.cache = y
            self.steps.add_(1)
            return y
    """
)
TWICE = MYMODELS_NET.replace("self.block = Block()", "self.blocks = nn.ModuleList([Block(), Block()])").replace(
    "return self.block(x)", "for block in self.blocks:\n            x = block(x)\n        return x"
)

LLAMA = textwrap.dedent(
    """\
    import torch
    from torch import nn

    import exportlens


    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wk = nn.Linear(8, 8)
            self.wv = nn.Linear(8, 8)
            self.cache_k = torch.zeros(2, 16, 8)
            self.cache_v = torch.zeros(2, 16, 8)

        def forward(self, x, start: int = 0):
            bsz, n, _ = x.shape
            xk, xv = self.wk(x), self.wv(x)
            self.cache_k = self.cache_k.to(xk)
            self.cache_v = self.cache_v.to(xk)
            self.cache_k[:bsz, start : start + n] = xk
            self.cache_v[:bsz, start : start + n] = xv
            return self.cache_k[:bsz, : start + n].sum(1) + self.cache_v[:bsz, : start + n].sum(1)


    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attention = Attention()

        def forward(self, x):
            return self.attention(x)


    class Transformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList([Layer(), Layer()])

        def forward(self, x):
            return self.layers[0](x) + self.layers[1](x)


    @exportlens.target
    def llama():
        return Transformer(), (torch.randn(2, 4, 8),)
    """
)


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _diagnostics(proc_stdout: str) -> list[dict[str, Any]]:
    return [d for f in json.loads(proc_stdout)["files"] for d in f["diagnostics"]]


def test_a_block_used_twice_gives_one_diagnostic_per_line_naming_every_instance(tmp_path: Path) -> None:
    mymodels_workspace(tmp_path, blocks=BLOCK, net=TWICE)
    proc = run_cli("check", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    found = {d["code"]: d for d in _diagnostics(proc.stdout)}
    assert sorted(found) == ["banned-mutation/tensor-attribute", "mutation/buffer"]  # one each, not one per instance
    attribute = found["banned-mutation/tensor-attribute"]
    assert (attribute["file"], attribute["line"], attribute["severity"]) == ("mymodels/blocks.py", _line(BLOCK, "self.cache = y"), "warning")
    assert attribute["message"].startswith("`self.blocks[0].cache` and `self.blocks[1].cache` are tensor attributes"), attribute["message"]
    assert "blocks.0" not in attribute["message"]
    buffer = found["mutation/buffer"]
    assert (buffer["file"], buffer["line"]) == ("mymodels/blocks.py", _line(BLOCK, "self.steps.add_(1)"))
    assert "`blocks.0.steps`" in buffer["message"] and "`blocks.1.steps`" in buffer["message"]


def test_a_kv_cache_written_in_place_is_one_error_per_attribute_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "llama.py").write_text(LLAMA)
    proc = run_cli("check", "--format", "json", "llama.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    found = _diagnostics(proc.stdout)
    # No "silently drops this update" warning beside the failure, no bare export-error at the factory.
    assert [(d["code"], d["severity"], d["line"]) for d in found] == [
        ("banned-mutation/tensor-attribute", "error", _line(LLAMA, "self.cache_k[:bsz, start : start + n] = xk")),
        ("banned-mutation/tensor-attribute", "error", _line(LLAMA, "self.cache_v[:bsz, start : start + n] = xv")),
    ]
    for d, attr in zip(found, ("cache_k", "cache_v"), strict=True):
        assert d["message"].startswith(f"`self.layers[0].attention.{attr}` and `self.layers[1].attention.{attr}` are tensor attributes")
        assert f"self.register_buffer('{attr}'" in d["message"]

    # Each error's quick fix, applied: the model exports, each update a buffer mutation.
    text = LLAMA
    for d in found:
        diagnostic = Diagnostic(d["code"], d["message"], d["line"], d["column"], d["end_line"], d["end_column"], d["target"], level="error")
        [fix] = fixes_for(text, diagnostic, FileResult(str(tmp_path / "llama.py")))
        assert fix.preferred
        text = apply(text, fix.edits)
    (tmp_path / "llama.py").write_text(text)
    proc = run_cli("check", "--format", "json", "llama.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert {d["code"] for d in _diagnostics(proc.stdout)} == {"mutation/buffer"}
