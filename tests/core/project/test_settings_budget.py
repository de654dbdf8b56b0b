"""A lowered program's memory budget: sizes as people write them, ``[tool.exportlens]
memory_budget`` read or ignored with a reason, the flag over pyproject, a target's
own over both, part of the cache key; and the record's memory as people read it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from exportlens.core.cache import keys
from exportlens.core.export.targets import TargetError, _from_declaration
from exportlens.core.model.lowering import Lowering, parse_size
from exportlens.core.pipeline import Overrides, Pipeline
from exportlens.core.project.settings import read


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ("512 MB", 512 << 20),
        ("1.5GB", 3 << 29),
        ("64 MiB", 64 << 20),
        ("800 kb", 800 << 10),
        ("2_048 B", 2048),
        ("1 TB", 1 << 40),
        (4096, 4096),
        ("4096", 4096),
        ("0 MB", None),
        (0, None),
        (-5, None),
        (True, None),
        (1.5, None),
        ("lots", None),
        ("12 parsecs", None),
        ("MB", None),
        ("nan MB", None),
        ("inf GB", None),
        (None, None),
    ],
)
def test_sizes_are_read_as_people_write_them(value: object, size: int | None) -> None:
    assert parse_size(value) == size


def _project(tmp_path: Path, body: str) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.exportlens]\n" + body)
    (tmp_path / "m.py").write_text("x = 1\n")
    return tmp_path / "m.py"


@pytest.mark.parametrize(
    ("body", "budget", "ignored"),
    [('memory_budget = "256 MB"\n', 256 << 20, False), ("memory_budget = 1024\n", 1024, False), ("", None, False), ('memory_budget = "big"\n', None, True), ("memory_budget = [1]\n", None, True)],
)
def test_the_budget_is_read_or_ignored_with_a_reason(tmp_path: Path, body: str, budget: int | None, ignored: bool) -> None:
    _project(tmp_path, body)
    settings = read(str(tmp_path / "pyproject.toml"))
    assert settings.memory_budget == budget
    assert any("memory_budget" in why for why in settings.ignored) == ignored


def test_the_flag_wins_over_pyproject_and_the_budget_is_in_the_key(tmp_path: Path) -> None:
    model = str(_project(tmp_path, 'memory_budget = "256 MB"\nlower = ["executorch"]\n'))
    from_project = Pipeline().request(model, id=1)
    from_flag = Pipeline(Overrides(memory_budget=1 << 20)).request(model, id=1)
    assert (from_project.memory_budget, from_flag.memory_budget) == (256 << 20, 1 << 20)
    source = b"x = 1\n"
    assert keys.first_key(from_project, source) != keys.first_key(from_flag, source)
    # Without lowering, the budget decides nothing: the key stays the export's.
    plain = replace(from_project, lower=())
    assert keys.first_key(plain, source) == keys.first_key(replace(plain, memory_budget=None), source)


def test_a_targets_own_budget_is_read_and_a_bad_one_is_its_error() -> None:
    built = _from_declaration({"model": _module(), "example_args": (), "memory_budget": "2 MB"}, "`f()`", None, False)
    assert built.memory_budget == 2 << 20
    with pytest.raises(TargetError, match=r"'memory_budget' in the dict `f\(\)` returns = 'a lot' is not a size"):
        _from_declaration({"model": _module(), "example_args": (), "memory_budget": "a lot"}, "`f()`", None, False)


def _module() -> object:
    import torch

    return torch.nn.Identity()


def test_the_record_says_what_the_program_needs() -> None:
    record = Lowering("executorch", "not-run", pte_bytes=2048, planned_memory_bytes=3 << 29, workspace_bytes=8 << 30, memory_dims="`batch` up to 32", skipped="it needs at least 9.5 GB to run")
    assert record.needed_bytes == (3 << 29) + (8 << 30)
    assert record.sizes() == ".pte 2.0 KB, planned memory 1.5 GB, XNNPACK workspace at least 8.0 GB"
    assert record.not_run_reason == "needs 9.5 GB"
    assert replace(record, skipped="built with fake weights: ...").not_run_reason == "fake weights"
    # A static program says its plan and, once run, its peak; no workspace where no Dim decides it.
    ran = Lowering("executorch", "ok", pte_bytes=2048, planned_memory_bytes=704, workspace_bytes=1024, run_peak_bytes=3 << 20)
    assert ran.sizes() == ".pte 2.0 KB, planned memory 704 B, run peak 3.0 MB"
