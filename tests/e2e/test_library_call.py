"""A data-dependent check inside a library the model calls (issue 11, fix 5): the
diagnostic is at the user's call line, where a ``torch._check`` would go, and names
the library's line as related information instead of hiding it behind torch's frames."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import check_json

LIBRARY = '''import torch


def gate(x):
    if x.sum() > 0:
        return x * 2
    return x - 1
'''

MODEL = '''import torch
from fancylib import gate


class Gated(torch.nn.Module):
    def forward(self, x):
        y = x + 1
        return gate(y)


model = Gated()
example_args = (torch.randn(4),)
'''


def test_a_check_inside_a_library_points_at_the_users_call(tmp_path: Path) -> None:
    library = tmp_path / "site" / "fancylib"  # outside the project: an installed library
    library.mkdir(parents=True)
    (library / "__init__.py").write_text(LIBRARY)
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 120\n")
    (project / "model.py").write_text(MODEL)
    code, doc = check_json(str(project / "model.py"), extra=("--no-cache",), env={"PYTHONPATH": str(tmp_path / "site")})
    assert code == 1
    [found] = doc["files"][0]["diagnostics"]
    assert (found["code"], found["line"], found["column"]) == ("data-dependent", 8, 9)
    assert "`return gate(y)` calls into a library whose check `if x.sum() > 0:` (fancylib/__init__.py:5)" in found["message"]
    assert "torch._check" in found["message"]
    [library_line] = [r for r in found["related"] if r["path"].endswith("fancylib/__init__.py")]
    assert library_line["line"] == 5 and "`if x.sum() > 0:`" in library_line["message"]
