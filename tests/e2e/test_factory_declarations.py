"""A factory declares what the other forms declare (issue 22): a ``pyproject.toml``
target's function may return a dict with the module globals' names, and so give
``dynamic_shapes`` and ``strict``; a factory that fails in a weight-init function
(an in-place change of a parameter outside ``torch.no_grad()``) says to use it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from tests.conftest import run_cli

MODELS = textwrap.dedent(
    """\
    import torch
    from torch import nn
    from torch.export import Dim


    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            return self.fc(x)


    class Logged(nn.Module):
        def forward(self, x):
            torch._dynamo.graph_break()
            return x + 1


    class Init(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 4)
            self.fc.weight.normal_(0, 0.02)

        def forward(self, x):
            return self.fc(x)


    def dynamic():
        return {"model": Net(), "example_args": (torch.randn(4, 8),), "dynamic_shapes": {"x": {0: Dim("batch", min=2, max=64)}}}


    def strict():
        return {"model": Logged(), "example_args": (torch.randn(2),), "strict": True}


    def initialised():
        return Init(), (torch.randn(2, 8),)


    def misspelt():
        return {"model": Net(), "example_args": (torch.randn(4, 8),), "dynamic_shape": {}}
    """
)
PYPROJECT = '[tool.exportlens]\ntargets = ["pkg/m.py:dynamic", "pkg/m.py:strict", "pkg/m.py:initialised", "pkg/m.py:misspelt"]\n'


def _check(tmp_path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    proc = run_cli("check", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    [entry] = json.loads(proc.stdout)["files"]
    return {t["name"]: t for t in entry["targets"]}, entry["diagnostics"]


def test_a_pyproject_factory_declares_dynamic_shapes_and_strict_and_init_failures_say_no_grad(tmp_path: Path) -> None:
    targets, diagnostics = _check(tmp_path)
    by_target = {d["target"]: d for d in diagnostics}

    dynamic = targets["dynamic"]
    assert dynamic["status"] == "ok"
    [x] = [s for s in dynamic["signature"]["inputs"] if s["kind"] == "USER_INPUT"]
    assert isinstance(x["shape"][0], str) and dynamic["signature"]["dim_names"] == {x["shape"][0]: "batch"}
    assert dynamic["signature"]["ranges"][x["shape"][0]] == [2, 64]

    # strict=True traces with TorchDynamo, which refuses the graph break (non-strict runs it).
    assert targets["strict"]["status"] == "error" and by_target["strict"]["code"] == "unsupported"

    init = by_target["initialised"]
    assert init["code"] == "target-error" and init["line"] == MODELS.splitlines().index("        self.fc.weight.normal_(0, 0.02)") + 1
    assert "`with torch.no_grad():`" in init["message"]

    misspelt = by_target["misspelt"]
    assert misspelt["code"] == "target-error" and "unknown key(s) 'dynamic_shape'" in misspelt["message"]
