"""A model that fails inside a library it calls (issue 22): transformers' GPT-NeoX
given ``return_dict=False`` raises ``'tuple' object has no attribute
'last_hidden_state'`` in its own code. The diagnostic says that the model fails
without export too (its eager run shows it), where in the library it was raised, and
which line of the user's code called it -- also when no line of the user's is on the
stack (the model is the library's class)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

# A stand-in for transformers, installed outside the project (a library, not the user's).
LIBRARY = textwrap.dedent(
    """\
    from dataclasses import dataclass

    import torch
    from torch import nn


    @dataclass
    class Output:
        last_hidden_state: torch.Tensor


    class Inner(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x, return_dict=True):
            y = self.fc(x)
            return Output(y) if return_dict else (y,)


    class ForCausalLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = Inner()
            self.head = nn.Linear(8, 4)

        def forward(self, x, **kwargs):
            outputs = self.inner(x, **kwargs)
            hidden = outputs.last_hidden_state
            return self.head(hidden)
    """
)
RAISING = LIBRARY.splitlines().index("        hidden = outputs.last_hidden_state") + 1
WRAPPED = textwrap.dedent(
    """\
    import torch
    from torch import nn

    from tinylib import ForCausalLM


    class Wrapper(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lm = ForCausalLM()

        def forward(self, x):
            return self.lm(x, return_dict=False)


    model = Wrapper()
    example_args = (torch.randn(2, 8),)
    """
)
DIRECT = textwrap.dedent(
    """\
    import torch

    from tinylib import ForCausalLM

    model = ForCausalLM()
    example_args = (torch.randn(2, 8),)
    example_kwargs = {"return_dict": False}
    """
)


def _check(tmp_path: Path, model: str) -> dict[str, Any]:
    site = tmp_path / "site" / "tinylib"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(LIBRARY)
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("")
    (project / "model.py").write_text(model)
    proc = run_cli("check", "--format", "json", "model.py", cwd=project, env={"PYTHONPATH": str(tmp_path / "site")})
    assert proc.returncode == 1, proc.stderr
    [entry] = json.loads(proc.stdout)["files"]
    [d] = entry["diagnostics"]
    return d


@pytest.mark.parametrize(("model", "line", "called"), [(WRAPPED, 13, True), (DIRECT, 5, False)], ids=["called-from-the-users-line", "the-library-is-the-model"])
def test_a_failure_inside_a_library_says_it_fails_without_export_where_and_from_which_line(tmp_path: Path, model: str, line: int, called: bool) -> None:
    d = _check(tmp_path, model)
    assert (d["code"], d["line"]) == ("eager-error", line)
    first, _, rest = d["message"].partition("\n")
    assert "fails without export too" in first and "AttributeError: 'tuple' object has no attribute 'last_hidden_state'" in first
    assert f"tinylib/__init__.py:{RAISING} (`hidden = outputs.last_hidden_state`)" in rest
    assert ("in the call this line makes" in rest) == called
    [related] = d["related"]
    assert (Path(related["path"]), related["line"]) == (tmp_path / "site" / "tinylib" / "__init__.py", RAISING)
