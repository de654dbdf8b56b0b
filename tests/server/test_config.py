"""Settings: defaults, both spellings, bad values reported and replaced by defaults."""

from __future__ import annotations

import json

import pytest

from exportlens.core.pipeline import limits_for
from exportlens.core.project.settings import ProjectSettings
from exportlens.server.config import Settings, merge, overrides, parse, section_of


def test_defaults() -> None:
    settings, problems = parse({})
    assert problems == []
    assert settings == Settings()
    assert (settings.debounce_ms, settings.timeout_s, settings.memory_mb, settings.workers) == (300, 120.0, 8192, 1)
    assert settings.cache and not settings.strict and settings.cache_dir is None


def test_nested_or_flat_sections() -> None:
    assert section_of({"exportlens": {"debounce_ms": 5}}) == {"debounce_ms": 5}
    assert section_of({"debounce_ms": 5}) == {"debounce_ms": 5}
    assert section_of(None) == {} and section_of("junk") == {}


def test_values_and_camel_case() -> None:
    settings, problems = parse({"debounceMs": 50, "timeout_s": 3, "memoryMb": 1024, "workers": 2.0, "cache": False, "strict": True})
    assert problems == []
    assert (settings.debounce_ms, settings.timeout_s, settings.memory_mb, settings.workers) == (50, 3.0, 1024, 2)
    assert not settings.cache and settings.strict
    assert settings.explicit == {"debounce_ms", "timeout_s", "memory_mb", "workers", "cache", "strict"}


def test_bad_values_fall_back_to_defaults_with_one_message_each() -> None:
    settings, problems = parse({"timeout_s": "soon", "debounce_ms": -5, "workers": True, "cache": "yes", "colour": "red"})
    assert (settings.timeout_s, settings.debounce_ms, settings.workers, settings.cache) == (120.0, 300, 1, True)
    assert len(problems) == 5
    for name in ("exportlens.timeout_s", "exportlens.debounce_ms", "exportlens.workers", "exportlens.cache", "exportlens.colour"):
        assert sum(p.startswith(name + ":") for p in problems) == 1, (name, problems)
    assert "'soon'" in problems[0] and "120.0" in problems[0]
    assert settings.explicit == frozenset()


def test_not_a_map() -> None:
    settings, problems = parse(["debounce_ms"])
    assert settings == Settings() and len(problems) == 1


def test_diagnostics_map_and_list() -> None:
    by_map, problems = parse({"diagnostics": {"mutation/buffer": False, "timeout": True, "nonsense": False}})
    assert by_map.diagnostics.disabled == {"mutation/buffer"}
    assert len(problems) == 1 and "nonsense" in problems[0]
    by_list, problems = parse({"diagnostics": ["mutation/buffer", "mutation/user-input"]})
    assert problems == [] and not by_list.diagnostics.enabled("mutation/user-input")
    assert by_list.diagnostics.enabled("eager-error")
    wrapped, _ = parse({"diagnostics": {"disabled": ["timeout"]}})
    assert wrapped.diagnostics.disabled == {"timeout"}
    bad, problems = parse({"diagnostics": 3})
    assert bad.diagnostics.disabled == frozenset() and len(problems) == 1


def test_none_means_default_without_complaint() -> None:
    settings, problems = parse({"cache_dir": None, "timeout_s": None})
    assert problems == [] and settings == Settings()


def test_merge_later_wins() -> None:
    assert merge({"a": 1, "b": 2}, {"b": 3}) == {"a": 1, "b": 3}


def test_pyproject_gives_way_to_explicit_editor_settings() -> None:
    project = ProjectSettings(timeout_s=10, memory_mb=2048, strict=True)
    defaults, _ = parse({})
    limits, strict = limits_for(project, overrides(defaults))
    assert (limits.timeout_s, limits.memory_mb, strict) == (10, 2048, True)
    explicit, _ = parse({"timeout_s": 3})
    limits, strict = limits_for(project, overrides(explicit))
    assert (limits.timeout_s, limits.memory_mb, strict) == (3, 2048, True)
    limits, strict = limits_for(ProjectSettings(), overrides(explicit))
    assert (limits.timeout_s, limits.memory_mb, strict) == (3, 8192, False)
    # An explicit false is a value, not "unset": it wins over pyproject's strict = true.
    unstrict, _ = parse({"strict": False})
    assert limits_for(project, overrides(unstrict))[1] is False


def test_the_editor_cache_settings_pass_through_as_they_are() -> None:
    settings, _ = parse({"cache": False, "cacheDir": "/tmp/elsewhere"})
    assert (overrides(settings).cache, overrides(settings).cache_dir) == (False, "/tmp/elsewhere")
    assert (overrides(Settings()).cache, overrides(Settings()).cache_dir) == (True, None)


def test_timeout_is_spelled_as_in_pyproject_and_the_vscode_extension() -> None:
    settings, problems = parse({"timeout": 7.5, "memoryMb": 2048})
    assert problems == []
    assert (settings.timeout_s, settings.memory_mb) == (7.5, 2048)
    assert "timeout_s" in settings.explicit


def test_null_diagnostics_means_the_default_without_complaint() -> None:
    settings, problems = parse({"diagnostics": None, "timeout": None, "cacheDir": None})
    assert problems == []
    assert settings == Settings()


INF, NAN = float("inf"), float("nan")
# (setting, a value a client can send: JSON's reader in Python takes NaN and Infinity)
NOT_FINITE_OR_OUT_OF_RANGE = [
    *[("timeout", v) for v in (NAN, INF, -INF, 0, -1, 0.0, 1e300, 10**400)],
    *[("memoryMb", v) for v in (NAN, INF, -INF, 0, -64, 63, 1 << 23, 1.5, 10**400)],
    *[("debounceMs", v) for v in (NAN, INF, -INF, -1, 60_001, 0.5)],
    *[("workers", v) for v in (NAN, INF, -INF, 0, -1, 65, 1e300, 1.5)],
]


@pytest.mark.adversarial
@pytest.mark.parametrize("key, value", NOT_FINITE_OR_OUT_OF_RANGE, ids=[f"{k}={v!r:.12}" for k, v in NOT_FINITE_OR_OUT_OF_RANGE])
def test_a_number_that_is_not_finite_or_in_range_is_reported_once_and_the_default_used(key: str, value: float) -> None:
    settings, problems = parse({key: value})
    assert settings == Settings(), settings  # every field the default, nothing explicit
    assert len(problems) == 1 and problems[0].startswith(f"exportlens.{key}: ") and "using the default" in problems[0], problems


def test_nan_and_infinity_from_the_wire_are_refused() -> None:
    section = json.loads('{"exportlens": {"timeout": NaN, "memoryMb": Infinity, "debounceMs": -Infinity, "workers": NaN}}')
    settings, problems = parse(section_of(section))
    assert settings == Settings() and len(problems) == 4, problems
