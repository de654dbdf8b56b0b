"""``[tool.exportlens] timeout`` and ``memory_mb``: a value that is not a finite number in
range (TOML has ``nan`` and ``inf``) is ignored and reported, never used: an infinite
timeout let a hanging model run forever."""

from __future__ import annotations

from pathlib import Path

import pytest

from exportlens.core.pipeline import Pipeline
from exportlens.core.project.settings import DEFAULT_TIMEOUT_S, MEMORY_RANGE_MB, TIMEOUT_RANGE_S, read

pytestmark = pytest.mark.adversarial

# (the line in [tool.exportlens], the field, the value read; None: ignored and reported)
LIMITS: list[tuple[str, str, float | int | None]] = [
    ("timeout = 30", "timeout_s", 30.0),
    ("timeout = 0.5", "timeout_s", 0.5),
    (f"timeout = {TIMEOUT_RANGE_S[1]}", "timeout_s", TIMEOUT_RANGE_S[1]),
    ("timeout = nan", "timeout_s", None),
    ("timeout = +nan", "timeout_s", None),
    ("timeout = inf", "timeout_s", None),
    ("timeout = -inf", "timeout_s", None),
    ("timeout = 0", "timeout_s", None),
    ("timeout = -1", "timeout_s", None),
    ("timeout = 0.01", "timeout_s", None),
    ("timeout = 1e300", "timeout_s", None),
    ("timeout = 9223372036854775807", "timeout_s", None),
    ('timeout = "60"', "timeout_s", None),
    ("timeout = true", "timeout_s", None),
    ("memory_mb = 2048", "memory_mb", 2048),
    (f"memory_mb = {MEMORY_RANGE_MB[0]}", "memory_mb", MEMORY_RANGE_MB[0]),
    ("memory_mb = nan", "memory_mb", None),
    ("memory_mb = inf", "memory_mb", None),
    ("memory_mb = 0", "memory_mb", None),
    ("memory_mb = -2048", "memory_mb", None),
    ("memory_mb = 2048.0", "memory_mb", None),
    (f"memory_mb = {MEMORY_RANGE_MB[1] + 1}", "memory_mb", None),
    ("memory_mb = true", "memory_mb", None),
]


@pytest.mark.parametrize("line, field, value", LIMITS, ids=[line for line, _, _ in LIMITS])
def test_a_limit_out_of_range_is_ignored_and_reported(tmp_path: Path, line: str, field: str, value: float | None) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(f"[tool.exportlens]\n{line}\nstrict = true\n")
    settings = read(str(pyproject))
    assert getattr(settings, field) == value
    assert settings.strict is True and settings.problem is None  # the other settings stay
    if value is None:
        key = line.split(" = ")[0]
        assert len(settings.ignored) == 1 and f"[tool.exportlens] {key} = " in settings.ignored[0], settings.ignored
        assert str(pyproject) in settings.ignored[0] and "ignored" in settings.ignored[0]
    else:
        assert settings.ignored == ()


def test_the_pipeline_reports_an_ignored_limit_once_and_uses_the_default(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = inf\n")
    heard: list[str] = []
    pipeline = Pipeline(warn=heard.append)
    for i, name in enumerate(("a.py", "b.py", "a.py")):
        request = pipeline.request(str(tmp_path / name), id=i)
        assert request.limits.timeout_s == DEFAULT_TIMEOUT_S
    assert len(heard) == 1 and "timeout = inf" in heard[0], heard
