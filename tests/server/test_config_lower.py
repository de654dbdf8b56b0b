"""The editor's ``lower`` setting: a list of known formats, explicit only when set
(else pyproject's ``lower`` applies), a bad value reported and ignored."""

from __future__ import annotations

from exportlens.server.config import overrides, parse


def test_lower_set_in_the_editor_overrides_pyproject() -> None:
    settings, problems = parse({"lower": ["onnx"]})
    assert problems == [] and overrides(settings).lower == ("onnx",)
    settings, _ = parse({"lower": []})
    assert overrides(settings).lower == ()  # off, whatever pyproject says


def test_lower_unset_leaves_it_to_pyproject() -> None:
    for raw in ({}, {"lower": None}):
        settings, problems = parse(raw)
        assert problems == [] and overrides(settings).lower is None


def test_a_bad_lower_is_one_problem_and_the_default() -> None:
    for bad in ("onnx", ["tflite"], [3]):
        settings, problems = parse({"lower": bad})
        assert overrides(settings).lower is None
        assert len(problems) == 1 and problems[0].startswith("exportlens.lower:"), problems
