"""``[tool.exportlens]`` read into ``ProjectSettings``: a table of sections and what
each setting reads as, the problems reported, the nearest-pyproject rule, and the
parse cache never serving an old file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from exportlens.core.project.settings import (
    ProjectSettings,
    declared_line,
    find_pyproject,
    pyproject_targets,
    read,
    settings_for,
    target_problems,
)

HOME = os.path.expanduser("~")

# (the body of [tool.exportlens], {field: expected}); "ROOT" stands for the pyproject's folder.
VALUES: list[tuple[str, dict[str, Any]]] = [
    ("", {"timeout_s": None, "memory_mb": None, "strict": None, "cache_dir": None, "targets": (), "problem": None}),
    ("timeout = 30", {"timeout_s": 30.0}),
    ("timeout = 2.5", {"timeout_s": 2.5}),
    ("timeout = 0", {"timeout_s": None}),
    ("timeout = -1", {"timeout_s": None}),
    ('timeout = "60"', {"timeout_s": None, "problem": None}),  # malformed values are ignored quietly
    ("memory_mb = 2048", {"memory_mb": 2048}),
    ("memory_mb = 2048.0", {"memory_mb": None}),
    ("memory_mb = 0", {"memory_mb": None}),
    ("strict = true", {"strict": True}),
    ("strict = false", {"strict": False}),
    ('strict = "yes"', {"strict": None}),
    ('cache_dir = ".cache"', {"cache_dir": "ROOT/.cache"}),
    ('cache_dir = "/elsewhere/cache"', {"cache_dir": "/elsewhere/cache"}),
    ('cache_dir = "~/c"', {"cache_dir": f"{HOME}/c"}),
    ('cache_dir = ""', {"cache_dir": None}),
    ("cache_dir = 3", {"cache_dir": None}),
    ('targets = ["pkg/models.py:make"]', {"targets": ("ROOT/pkg/models.py:make",)}),
    ('targets = ["pkg/../m.py:Factory.make", "/abs/m.py:f"]', {"targets": ("ROOT/m.py:Factory.make", "/abs/m.py:f")}),
    (
        'targets = "m.py:make"\ntimeout = 9',  # the targets are dropped, the other settings stay
        {"targets": (), "timeout_s": 9.0, "problem": 'PYPROJECT: [tool.exportlens] targets must be a list of "path.py:function" strings'},
    ),
    ('targets = ["m.py"]', {"targets": (), "problem": 'PYPROJECT: [tool.exportlens] targets must be a list of "path.py:function" strings'}),
]


@pytest.mark.parametrize("body, expected", VALUES, ids=[body or "empty" for body, _ in VALUES])
def test_each_setting_reads_as_in_the_table(tmp_path: Path, body: str, expected: dict[str, Any]) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(f"[project]\nname = 'x'\n\n[tool.exportlens]\n{body}\n")
    settings = read(str(pyproject))
    assert settings.pyproject == str(pyproject)
    for name, value in expected.items():
        if isinstance(value, str):
            value = value.replace("ROOT", str(tmp_path)).replace("PYPROJECT", str(pyproject))
        elif isinstance(value, tuple):
            value = tuple(v.replace("ROOT", str(tmp_path)) for v in value)
        assert getattr(settings, name) == value, name


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[tool.exportlens\n", "cannot read PYPROJECT: "),
        ("[tool]\nexportlens = 3\n", "PYPROJECT: [tool.exportlens] must be a table"),
    ],
)
def test_a_section_that_cannot_be_read_is_one_problem_and_no_settings(tmp_path: Path, text: str, problem: str) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(text)
    settings = read(str(pyproject))
    assert settings.problem is not None and settings.problem.startswith(problem.replace("PYPROJECT", str(pyproject)))
    assert (settings.timeout_s, settings.targets) == (None, ())
    assert pyproject_targets(str(pyproject)) == ([], settings.problem)


def test_a_file_that_is_not_utf8_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_bytes(b"[tool.exportlens]\ntimeout = 3 # \xff\n")
    assert (read(str(pyproject)).problem or "").startswith(f"cannot read {pyproject}: ")


def test_no_tool_table_or_no_section_is_all_unset(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    for text in ("[project]\nname = 'x'\n", "tool = 1\n", "[tool.ruff]\nline-length = 1\n"):
        pyproject.write_text(text)
        assert read(str(pyproject)) == ProjectSettings(pyproject=str(pyproject))


def test_the_nearest_pyproject_applies_and_stop_bounds_the_search(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 1\n")
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    model = str(inner / "model.py")
    assert find_pyproject(model) == str(tmp_path / "pyproject.toml")
    assert settings_for(model).timeout_s == 1.0
    assert find_pyproject(model, stop=str(inner)) is None
    assert settings_for(model, stop=str(inner)) == ProjectSettings()
    (tmp_path / "a" / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 2\n")
    assert settings_for(model).timeout_s == 2.0


def test_an_unchanged_file_is_parsed_once(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.exportlens]\ntimeout = 5\n")
    assert read(str(pyproject)) is read(str(pyproject))


def test_a_rewrite_with_the_same_size_and_mtime_is_seen(tmp_path: Path) -> None:
    """A file system whose clock ticks coarsely gives two quick writes one mtime: a
    cache keyed by mtime and size would go on serving the first."""
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.exportlens]\ntimeout = 5\n")
    before = os.stat(pyproject)
    assert read(str(pyproject)).timeout_s == 5.0
    pyproject.write_text("[tool.exportlens]\ntimeout = 7\n")
    os.utime(pyproject, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(pyproject).st_size == before.st_size
    assert read(str(pyproject)).timeout_s == 7.0


def test_a_removed_file_is_a_problem_not_an_old_answer(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.exportlens]\ntimeout = 5\n")
    assert read(str(pyproject)).timeout_s == 5.0
    pyproject.unlink()
    gone = read(str(pyproject))
    assert gone.timeout_s is None and (gone.problem or "").startswith(f"cannot read {pyproject}: ")


@pytest.mark.parametrize(
    "text, lines",
    [
        ('[tool.exportlens]\ntargets = ["gone.py:make", "m.py:make", "../up.py:make"]\n', [2, 2]),
        ("[project]\nname = 'x'\n\n[tool.exportlens]\ntargets = [\n  'm.py:make',\n  'gone.py:make',\n  '../up.py:make',\n]\n", [7, 8]),
        ('[tool]\nexportlens.targets = [\n  "gone.py:make",\n  "../up.py:make",\n]\n', [3, 4]),
        ('tool = {exportlens = {targets = ["gone.py:make", "../up.py:make"]}}\n', [1, 1]),
    ],
)
def test_target_problems_point_at_their_entry(tmp_path: Path, text: str, lines: list[int]) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "m.py").write_text("def make(): ...\n")
    (tmp_path / "up.py").write_text("def make(): ...\n")
    (project / "pyproject.toml").write_text(text)
    problems = target_problems(str(project / "pyproject.toml"))
    assert [(p.entry, p.line) for p in problems] == list(zip(["gone.py:make", "../up.py:make"], lines, strict=True))
    assert "does not exist" in problems[0].message and "outside the project" in problems[1].message


@pytest.mark.parametrize(
    "text, line, column",
    [
        ('[project]\nname = "x"\n\n[tool.exportlens\ntargets = ["m.py:make"]\n', 4, 17),  # an unclosed table header
        ('[tool.exportlens]\ntimeout = 3\ntargets = "m.py:make"\n', 3, 1),  # targets not a list
        ('[project]\nname = "x"\n[tool]\nexportlens = 3\n', 3, 1),  # the section not a table
        (b'[tool.exportlens]\ntimeout = 3 # \xff\n', 2, 1),  # not UTF-8
    ],
)
def test_a_malformed_pyproject_is_one_problem_at_its_line(tmp_path: Path, text: str | bytes, line: int, column: int) -> None:
    """Issue 22: a pyproject.toml that does not parse is an error located in it, at the
    TOML error's position, not at line 1 of a model file (or nowhere)."""
    pyproject = tmp_path / "pyproject.toml"
    if isinstance(text, bytes):
        pyproject.write_bytes(text)
    else:
        pyproject.write_text(text)
    settings = read(str(pyproject))
    assert settings.problem is not None and (settings.problem_line, settings.problem_column) == (line, column)
    [problem] = target_problems(str(pyproject))
    assert (problem.line, problem.column, problem.message) == (line, column, f"{settings.problem}; its targets are ignored")


def test_an_editor_buffer_of_the_pyproject_is_read_as_it_is(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.exportlens]\n")
    [problem] = target_problems(str(pyproject), text="[tool.exportlens\n")
    assert problem.line == 1 and "Expected ']'" in problem.message
    assert target_problems(str(pyproject)) == []


def test_an_entry_is_found_by_its_absolute_form_with_its_columns(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.exportlens]\ntargets = [\n  "pkg/m.py:make",\n  \'pkg/m.py:other\',\n]\n')
    assert declared_line(str(tmp_path / "pyproject.toml"), f"{tmp_path}/pkg/m.py:other") == (4, 3, 19)
    assert declared_line(str(tmp_path / "pyproject.toml"), f"{tmp_path}/pkg/m.py:gone") is None
