"""``[tool.exportlens] lower``: read once, resolved like the limits (override, then
pyproject, then the default: off), a misspelt value ignored and said; and the
request's lowering is part of the cache key, with the onnx packages' versions."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from exportlens.core.cache import keys
from exportlens.core.pipeline import Overrides, Pipeline
from exportlens.core.project.settings import read


def _pyproject(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.exportlens]\n" + body)
    (tmp_path / "m.py").write_text("x = 1\n")
    return path


@pytest.mark.parametrize(
    "body, lower, ignored",
    [
        ('lower = ["onnx"]\n', ("onnx",), False),
        ('lower = ["onnx", "onnx"]\n', ("onnx",), False),
        ("lower = []\n", (), False),
        ("", None, False),
        ('lower = "onnx"\n', None, True),
        ('lower = ["onnxx"]\n', None, True),
        ("lower = [1]\n", None, True),
    ],
)
def test_lower_is_read_or_ignored_with_a_reason(tmp_path: Path, body: str, lower: tuple[str, ...] | None, ignored: bool) -> None:
    settings = read(str(_pyproject(tmp_path, body)))
    assert settings.lower == lower
    assert any("[tool.exportlens] lower" in why for why in settings.ignored) == ignored


def test_the_override_wins_over_pyproject_and_off_is_the_default(tmp_path: Path) -> None:
    _pyproject(tmp_path, 'lower = ["onnx"]\n')
    path = str(tmp_path / "m.py")
    assert Pipeline().request(path, id=1).lower == ("onnx",)
    assert Pipeline(Overrides(lower=())).request(path, id=1).lower == ()
    request = Pipeline(Overrides(keep_lowered=("onnx", "executorch"))).request(path, id=1)
    assert request.keep_lowered == ("onnx",)  # only what is lowered is kept
    (tmp_path / "pyproject.toml").write_text("")
    assert Pipeline().request(path, id=1).lower == ()
    assert Pipeline(Overrides(keep_lowered=("onnx",))).request(path, id=1).keep_lowered == ()  # nothing to keep


def test_lowering_settings_and_versions_are_in_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _pyproject(tmp_path, "")
    path = str(tmp_path / "m.py")
    off = Pipeline().request(path, id=1)
    on = Pipeline(Overrides(lower=("onnx",))).request(path, id=1)
    keep = Pipeline(Overrides(lower=("onnx",), keep_lowered=("onnx",))).request(path, id=1)
    et = Pipeline(Overrides(lower=("executorch",))).request(path, id=1)
    both = Pipeline(Overrides(lower=("onnx", "executorch"))).request(path, id=1)
    et_keep = Pipeline(Overrides(lower=("executorch",), keep_lowered=("executorch",))).request(path, id=1)
    requests = {"off": off, "on": on, "keep": keep, "et": et, "both": both, "et_keep": et_keep}
    key = {name: keys.first_key(r, b"x = 1\n") for name, r in requests.items()}
    assert len(set(key.values())) == len(requests)
    real = importlib.metadata.version

    def version(name: str) -> str:
        return "9.9" if name in ("onnxscript", "executorch") else real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    assert keys.first_key(on, b"x = 1\n") != key["on"]  # another converter: another answer
    assert keys.first_key(et, b"x = 1\n") != key["et"]  # another ExecuTorch: another answer
    assert keys.first_key(off, b"x = 1\n") == key["off"]  # without lowering the versions do not matter
