"""An example input outside its ``Dim``'s range (issue 22): ``Dim("batch", min=4,
max=64)`` with an example of batch 2 is a ``constraint-violation`` at the ``Dim(...)``
declaration, naming ``batch`` and ``x.shape[0]``, with the example's line as related
-- not at the ``class`` line or the factory's ``def``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from exportlens.core.export.dim_ranges import parse
from tests.conftest import run_cli

MODEL = textwrap.dedent(
    """\
    import torch
    from torch import nn
    from torch.export import Dim

    import exportlens


    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            return self.fc(x)
    """
)
FORMS = {
    "globals": MODEL.replace("\nimport exportlens\n", "")
    + '\n\nbatch = Dim("batch", min=4, max=64)\nmodel = M()\nexample_args = (torch.randn(2, 8),)\ndynamic_shapes = {"x": {0: batch}}\n',
    "factory": MODEL
    + '\n\n@exportlens.target(dynamic_shapes={"x": {0: Dim("batch", min=4, max=64)}})\ndef make_net():\n    return M(), (torch.randn(2, 8),)\n',
}


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_violation_is_at_the_dim_with_the_example_as_related(tmp_path: Path, form: str) -> None:
    text = FORMS[form]
    (tmp_path / "m.py").write_text(text)
    proc = run_cli("check", "--format", "json", "m.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    [entry] = json.loads(proc.stdout)["files"]
    [d] = entry["diagnostics"]
    declaration = _line(text, 'Dim("batch", min=4, max=64)')
    assert (d["code"], d["line"]) == ("constraint-violation", declaration)
    assert text.splitlines()[declaration - 1][d["column"] - 1 :].startswith('Dim("batch"')
    assert "`batch`" in d["message"] and "`x.shape[0]` is 2" in d["message"] and "[4, 64]" in d["message"]
    example = _line(text, "example_args =" if form == "globals" else "return M(), (torch.randn(2, 8),)")
    assert [(r["path"], r["line"]) for r in d["related"]] == [("m.py", example)]


def test_torchs_message_is_read_with_unbounded_ends() -> None:
    assert parse("2 not in range [4, 64]\n\nThe error above ...") == (2, 4, 64)
    assert parse("70 not in range [2, int_oo]") == (70, 2, None)
    assert parse("Constraints violated (batch)!") is None
