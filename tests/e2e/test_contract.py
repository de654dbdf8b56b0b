"""The export contract through the real command: ``exportlens snapshot`` records the
signatures, ``exportlens check`` fails on a breaking edit at the line that changed,
reports a compatible one as information, and reports a target that disappeared.

Each test gets its own project (a ``pyproject.toml`` and one model with a ``Dim``);
exports go through the session's result cache, so an unchanged file is a cache hit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import check_json, run_cli
from tests.workspaces import CONTRACT_MODEL as MODEL

SNAPSHOT = "exportlens.snapshot.json"


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 120\n")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mlp.py").write_text(MODEL)
    proc = run_cli("snapshot", cwd=tmp_path)  # no PATH: the project of the current folder
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == f"{SNAPSHOT}: 1 target recorded (added: models/mlp.py: TinyMLP)"
    return tmp_path


def edit(project: Path, old: str, new: str) -> str:
    path = project / "models" / "mlp.py"
    text = path.read_text().replace(old, new)
    path.write_text(text)
    return text


def contract_diagnostics(doc: dict[str, Any]) -> list[tuple[str, int, str, str]]:
    return [(f["path"], d["line"], d["severity"], d["message"].split("\n")[0]) for f in doc["files"] for d in f["diagnostics"] if d["code"] == "signature-changed"]


def test_snapshot_records_named_dims_and_is_deterministic(project: Path) -> None:
    first = (project / SNAPSHOT).read_bytes()
    recorded = json.loads(first)["files"]["models/mlp.py"]["TinyMLP"]
    assert recorded["inputs"][-1] == {"arg": "tensor", "device": "cpu", "dtype": "float32", "kind": "USER_INPUT", "name": "x", "shape": ["batch", 8], "target": None}
    assert recorded["outputs"] == [{"arg": "tensor", "device": "cpu", "dtype": "float32", "kind": "USER_OUTPUT", "shape": ["batch", 4], "target": None}]
    assert recorded["ranges"] == {"batch": [1, 32]}
    # Same code, same bytes: a second run leaves the file alone, and so does a fresh
    # export (no cache) that writes it from nothing.
    again = run_cli("snapshot", cwd=project)
    assert again.returncode == 0 and again.stdout.strip().endswith("1 target recorded, unchanged")
    (project / SNAPSHOT).unlink()
    fresh = run_cli("snapshot", "--no-cache", cwd=project)
    assert fresh.returncode == 0, fresh.stderr
    assert (project / SNAPSHOT).read_bytes() == first


def test_unchanged_project_checks_clean_from_a_subfolder(project: Path) -> None:
    code, doc = check_json(cwd=project / "models")  # no PATH, inside the project
    assert code == 0
    assert [f["path"] for f in doc["files"]] == ["mlp.py"]
    assert contract_diagnostics(doc) == []


def test_wider_output_fails_at_the_return_line(project: Path) -> None:
    text = edit(project, "nn.Linear(16, 4)", "nn.Linear(16, 6)")
    code, doc = check_json(cwd=project)
    assert code == 1
    found = contract_diagnostics(doc)
    assert ("models/mlp.py", line_of(text, "return self.fc2(h)"), "error", "output 0: float32[batch, 4] -> float32[batch, 6]") in found
    # The cause, too: the layer whose weight changed shape.
    assert ("models/mlp.py", line_of(text, "self.fc2 = "), "error", "parameter `fc2.weight`: float32[4, 16] -> float32[6, 16]") in found
    proc = run_cli("check", "--no-signatures", cwd=project)
    assert proc.returncode == 1
    assert f"models/mlp.py:{line_of(text, 'return self.fc2(h)')}:9: error[signature-changed]: output 0: float32[batch, 4] -> float32[batch, 6] [TinyMLP]" in proc.stdout


def test_widened_range_is_information_and_passes(project: Path) -> None:
    text = edit(project, "max=32", "max=64")
    code, doc = check_json(cwd=project)
    assert code == 0
    assert contract_diagnostics(doc) == [
        ("models/mlp.py", line_of(text, "def forward(self, x)"), "information", "input `x`: float32[batch, 8] (batch in [1, 32]) -> float32[batch, 8] (batch in [1, 64])"),
    ]
    # Recording it makes the check clean again.
    assert run_cli("snapshot", cwd=project).returncode == 0
    code, doc = check_json(cwd=project)
    assert (code, contract_diagnostics(doc)) == (0, [])


def test_narrowed_range_fails(project: Path) -> None:
    edit(project, "max=32", "max=16")
    code, doc = check_json(cwd=project)
    assert code == 1
    assert [(sev, msg) for _, _, sev, msg in contract_diagnostics(doc)] == [("error", "input `x`: float32[batch, 8] (batch in [1, 32]) -> float32[batch, 8] (batch in [1, 16])")]


def test_removed_target_is_reported(project: Path) -> None:
    # Renamed: the recorded target is gone (an error at line 1), the new one is not recorded yet.
    text = edit(project, "TinyMLP", "SmallMLP")
    code, doc = check_json(cwd=project)
    assert code == 1
    assert contract_diagnostics(doc) == [
        ("models/mlp.py", 1, "error", f"target `TinyMLP` is recorded in {SNAPSHOT} but no longer declared"),
        ("models/mlp.py", line_of(text, "class SmallMLP"), "information", f"target `SmallMLP` is not in {SNAPSHOT}"),
    ]
    # A deleted model file: its targets are reported under its old path.
    (project / "models" / "mlp.py").unlink()
    code, doc = check_json(cwd=project)
    assert code == 1
    assert contract_diagnostics(doc) == [("models/mlp.py", 1, "error", f"target `TinyMLP` is recorded in {SNAPSHOT} but no longer declared")]
    # Recording the removal empties the entry, and the check passes.
    proc = run_cli("snapshot", cwd=project)
    assert proc.returncode == 0 and "removed: models/mlp.py: TinyMLP" in proc.stdout
    assert json.loads((project / SNAPSHOT).read_text())["files"] == {}
    assert check_json(cwd=project)[0] == 0


@pytest.mark.adversarial
def test_a_conflicted_snapshot_is_an_error_not_a_pass(project: Path) -> None:
    path = project / SNAPSHOT
    path.write_text("<<<<<<< HEAD\n" + path.read_text() + "=======\n>>>>>>> branch\n")
    code, doc = check_json(cwd=project)
    assert code == 1
    [(file, line, severity, message)] = contract_diagnostics(doc)
    assert (file, line, severity) == ("models/mlp.py", 1, "error") and "merge conflict" in message
    # A snapshot of one file only would lose the others' entries: refused...
    proc = run_cli("snapshot", "models/mlp.py", cwd=project)
    assert proc.returncode == 1 and "over the whole project" in proc.stderr
    assert path.read_text().startswith("<<<<<<<")
    # ...while the whole project's writes it anew.
    proc = run_cli("snapshot", cwd=project)
    assert proc.returncode == 0 and "writing it anew" in proc.stderr
    assert check_json(cwd=project)[0] == 0
