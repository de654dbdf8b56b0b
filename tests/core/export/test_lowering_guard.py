"""An exception of exportlens's own while lowering never takes the export with it: the
target stays exported (status, signature, its other findings), and that destination's
record is an ``error`` that says exportlens failed. The bug is planted in a stand-in
destination, since every known one is fixed."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

import exportlens.core.export.lowering as lowering
from exportlens.core.export.job import export_target
from exportlens.core.export.loader import load
from exportlens.core.export.targets import discover

MODEL = """
    import torch


    class Net(torch.nn.Module):
        def forward(self, x):
            return x.relu(), None


    model = Net()
    example_args = (torch.randn(2, 3),)
"""


class Broken:
    format = "onnx"
    title = "ONNX"
    runtime = "onnxruntime"
    product = "converted model"
    packages: tuple[str, ...] = ()
    install = "pip install nothing"

    def lower(self, subject: Any, versions: str) -> Any:
        raise RuntimeError("Could not infer dtype of NoneType")

    def run(self, lowered: Any, subject: Any) -> list[Any]:
        raise AssertionError("never reached")


def test_an_internal_error_while_lowering_keeps_the_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "model.py").write_text(textwrap.dedent(MODEL))
    loaded = load(str(tmp_path / "model.py"), None, str(tmp_path))
    [candidate] = discover(loaded.module, loaded.index, strict_default=False, pyproject_entries=[], root=str(tmp_path))
    monkeypatch.setattr(lowering, "destination", lambda format: Broken())
    result, found = export_target(candidate, loaded, lower=("onnx",))
    assert result.status == "ok" and result.signature is not None
    assert [s.kind for s in result.signature.outputs] == ["USER_OUTPUT", "USER_OUTPUT"]
    [record] = result.lowerings
    assert (record.format, record.status) == ("onnx", "error")
    [error] = [d for d in found if d.code == "lowering/onnx-error"]
    assert error.message.startswith("exportlens failed while lowering to ONNX (RuntimeError: Could not infer dtype of NoneType at test_lowering_guard.py:")
    assert "the export itself is fine; please report it" in error.message and record.errors == (error.message,)
    assert error.line == candidate.where.line
