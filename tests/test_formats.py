"""The SARIF and GitHub formatters on hand-made results: escaping, character columns
on non-ASCII lines, files outside the current folder or gone, severities."""

from __future__ import annotations

from pathlib import Path

from exportlens.core.model.results import Diagnostic, FileResult, Related
from exportlens.formats import github, sarif
from exportlens.formats.columns import Columns
from tests.e2e.test_ci_formats import validate


def test_byte_columns_become_character_columns(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("x = 'ééé'  # y\n")
    columns = Columns()
    byte_col = len("x = 'ééé'  # ".encode()) + 1
    assert columns.char_column(str(path), 1, byte_col) == len("x = 'ééé'  # ") + 1
    assert columns.char_column(str(path), 1, 1) == 1
    assert columns.char_column(str(path), 1, 200) == 200 - len("ééé".encode()) + len("ééé")  # past the end
    assert columns.char_column(str(tmp_path / "gone.py"), 3, 7) == 7


def test_github_escapes_what_would_end_the_command(tmp_path: Path) -> None:
    d = Diagnostic("signature-changed", "50% wider: a, b\nsecond line\r", 3, 2, target="Net, v2", level="information")
    line = github.annotation(str(tmp_path / "m.py"), d, Columns(), cwd=str(tmp_path))
    assert line == "::notice file=m.py,line=3,col=2,title=exportlens signature-changed (Net%2C v2)::50%25 wider: a, b%0Asecond line%0D"
    assert "\n" not in line


def test_github_related_locations_and_severities(tmp_path: Path) -> None:
    d = Diagnostic("constraint-violation", "batch specialised", 4, 1, 4, 9, "Net", (Related(str(tmp_path / "m.py"), 9, "this code specialises it"),))
    line = github.annotation(str(tmp_path / "m.py"), d, Columns(), cwd=str(tmp_path))
    assert line.startswith("::error file=m.py,line=4,col=1,endLine=4,endColumn=9,")
    assert line.endswith("::batch specialised%0Am.py:9: note: this code specialises it")
    warning = Diagnostic("mutation/parameter", "m", 1)
    assert github.annotation("/x/m.py", warning, Columns(), cwd="/x").startswith("::warning ")


def test_sarif_paths_outside_the_folder_and_points(tmp_path: Path) -> None:
    inside = tmp_path / "pkg" / "a b.py"
    outside = "/elsewhere/m.py"
    results = [
        FileResult(str(inside), (Diagnostic("import-error", "boom", 2, 5),)),
        FileResult(outside, (Diagnostic("signature-changed", "gone", 1, level="error", target="Net"),)),
    ]
    log = sarif.to_sarif(results, "0.1.0", cwd=str(tmp_path))
    validate(log)
    first, second = log["runs"][0]["results"]
    assert first["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "pkg/a%20b.py", "uriBaseId": "%SRCROOT%"}
    assert first["locations"][0]["physicalLocation"]["region"] == {"startLine": 2, "startColumn": 5, "endLine": 2, "endColumn": 6}
    assert second["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "file:///elsewhere/m.py"}
    assert (second["level"], second["properties"]) == ("error", {"target": "Net"})
