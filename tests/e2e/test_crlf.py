"""A model file saved with Windows line endings (``\\r\\n``): its diagnostics sit at
the same lines and columns as the same file with ``\\n``, the ``\\r`` in no range."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import check_json

MODEL = [
    "import torch",
    "",
    "class M(torch.nn.Module):",
    "    def forward(self, x):",
    "        return x.view(-1, 7)",
    "",
    "model = M()",
    "example_args = (torch.ones(2, 3),)",
    "",
]


def test_crlf_and_lf_files_get_the_same_diagnostics(tmp_path: Path) -> None:
    (tmp_path / "crlf.py").write_bytes("\r\n".join(MODEL).encode())
    (tmp_path / "lf.py").write_bytes("\n".join(MODEL).encode())
    _, report = check_json("crlf.py", "lf.py", cwd=tmp_path, extra=("--no-cache",))
    found = {f["path"]: [(d["code"], d["line"], d["column"], d["end_line"], d["end_column"]) for d in f["diagnostics"]] for f in report["files"]}
    assert found["crlf.py"] == found["lf.py"] == [("eager-error", 5, 9, 5, 29)]
