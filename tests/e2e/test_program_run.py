"""A model that exports but cannot run is not reported as exported (issue 22): the
block ``nn.Linear(8, 8)`` then ``nn.Linear(8, 4).double()`` in ``mymodels/blocks.py``
exports (fake tensors do not check dtypes) and fails when called; the exported
program, run once on the example inputs, says so at the block's line, in every format."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.conftest import run_cli
from tests.workspaces import MYMODELS_NET, mymodels_workspace

BLOCKS = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(8, 8)
            self.b = nn.Linear(8, 4).double()

        def forward(self, x):
            y = self.a(x)
            return self.b(y)
    """
)
LINE = BLOCKS.splitlines().index("        return self.b(y)") + 1


def test_a_program_that_does_not_run_is_an_error_at_the_failing_line(tmp_path: Path) -> None:
    mymodels_workspace(tmp_path, blocks=BLOCKS)
    proc = run_cli("check", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # was 0: "1 exported, no diagnostics"
    [entry] = json.loads(proc.stdout)["files"]
    [d] = entry["diagnostics"]
    assert (d["code"], d["file"], d["line"]) == ("eager-error", "mymodels/blocks.py", LINE)
    assert "mat1 and mat2 must have the same dtype" in d["message"]
    [target] = entry["targets"]
    assert target["status"] == "ok" and target["run"]["status"] == "failed"

    text = run_cli("check", cwd=tmp_path).stdout
    assert f"mymodels/blocks.py:{LINE}:9: error[eager-error]: `make_net` exports, but the exported program fails" in text
    declared = MYMODELS_NET.splitlines().index("def make_net():") + 1
    assert f"make_net (mymodels/net.py:{declared}): ok, exported in " in text and "; the program fails on the example inputs" in text


EVERYTHING_FAKE = {"EXPORTLENS_FAKE_MIN_BYTES": "0"}  # small weights built as a 70B model's are


def test_never_run_with_fake_weights_and_run_when_the_user_asks_for_real_ones(tmp_path: Path) -> None:
    """Fake weights hold no values a run could be judged by: the run is skipped and the
    JSON says why; ``--weights real`` (the user's setting) builds real ones and runs it."""
    mymodels_workspace(tmp_path, blocks=BLOCKS)
    proc = run_cli("check", "--format", "json", "--no-cache", cwd=tmp_path, env=EVERYTHING_FAKE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [entry] = json.loads(proc.stdout)["files"]
    [target] = entry["targets"]
    assert entry["diagnostics"] == [] and (target["status"], target["weights"]) == ("ok", "fake")
    assert target["run"]["status"] == "skipped" and "fake weights" in target["run"]["reason"]

    proc = run_cli("check", "--format", "json", "--no-cache", "--weights", "real", cwd=tmp_path, env=EVERYTHING_FAKE)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [entry] = json.loads(proc.stdout)["files"]
    [target] = entry["targets"]
    assert (target["weights"], target["run"]["status"]) == ("real", "failed")
    assert [(d["code"], d["line"]) for d in entry["diagnostics"]] == [("eager-error", LINE)]


PRINTING = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(8, 8)

        def forward(self, x):
            torch.ops.aten._print("step")
            return self.a(x) + 1
    """
)


def test_a_program_with_effect_tokens_runs(tmp_path: Path) -> None:
    """``aten._print`` gives the program an effect token in and out, which torch's own
    ``ep.module()`` makes and drops; the check run does the same (issue 29, point 4)."""
    mymodels_workspace(tmp_path, blocks=PRINTING)
    proc = run_cli("check", "--format", "json", "--no-cache", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # was 1: an eager-error, "Expected positional argument for parameter x"
    [entry] = json.loads(proc.stdout)["files"]
    [target] = entry["targets"]
    assert entry["diagnostics"] == [] and (target["status"], target["run"]) == ("ok", {"status": "ok", "reason": None})
