"""The start method, as every front end resolves it: the platform's default, the
order of the settings (flag or editor, environment, pyproject), fork where there is
none, and the spellings each source accepts."""

from __future__ import annotations

from pathlib import Path

import pytest

from exportlens.core.isolation.startmethod import StartMethod, platform_default, resolve
from exportlens.core.pipeline import Overrides, Pipeline
from exportlens.core.project.settings import read
from exportlens.server.config import overrides, parse


@pytest.mark.parametrize("platform, method", [("linux", "fork"), ("darwin", "spawn"), ("win32", "spawn"), ("cygwin", "spawn"), ("freebsd14", "spawn")])
def test_auto_forks_only_on_linux(platform: str, method: str) -> None:
    assert platform_default(platform) == method
    assert resolve(None, None, env="", platform=platform) == StartMethod(method, f"auto on {platform}")
    assert resolve("auto", "auto", env="auto", platform=platform).method == method


@pytest.mark.parametrize(
    "explicit, env, project, method, source",
    [
        ("spawn", "fork", "fork", "spawn", "setting"),
        (None, "spawn", "fork", "spawn", "$EXPORTLENS_START_METHOD"),
        ("auto", "spawn", None, "spawn", "$EXPORTLENS_START_METHOD"),
        (None, "", "spawn", "spawn", "[tool.exportlens] start_method"),
        (None, "nonsense", "spawn", "spawn", "[tool.exportlens] start_method"),
        (None, " Spawn ", None, "spawn", "$EXPORTLENS_START_METHOD"),
    ],
)
def test_the_setting_then_the_environment_then_pyproject(explicit: str | None, env: str, project: str | None, method: str, source: str) -> None:
    assert resolve(explicit, project, env=env, platform="linux") == StartMethod(method, source)


def test_fork_where_there_is_none_is_spawn_and_says_why() -> None:
    chosen = resolve("fork", None, env="", platform="win32")
    assert chosen.method == "spawn" and "Windows" in chosen.why
    assert resolve("fork", None, env="", platform="darwin") == StartMethod("fork", "setting")  # macOS: at the user's risk


def test_the_environment_is_read_when_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXPORTLENS_START_METHOD", "spawn")
    assert resolve(platform="linux").method == "spawn"
    monkeypatch.setenv("EXPORTLENS_START_METHOD", "fork")
    assert resolve(platform="linux").method == "fork"
    assert "fork" in str(resolve(platform="linux")) and "$EXPORTLENS_START_METHOD" in str(resolve(platform="linux"))


@pytest.mark.parametrize("value, read_as, ignored", [('"spawn"', "spawn", False), ('"auto"', "auto", False), ('"forkserver"', None, True), ("1", None, True)])
def test_pyproject_start_method(tmp_path: Path, value: str, read_as: str | None, ignored: bool) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.exportlens]\nstart_method = {value}\n")
    settings = read(str(tmp_path / "pyproject.toml"))
    assert settings.start_method == read_as
    assert any("start_method" in why for why in settings.ignored) == ignored


def test_the_pipeline_resolves_for_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EXPORTLENS_START_METHOD", raising=False)
    (tmp_path / "pyproject.toml").write_text('[tool.exportlens]\nstart_method = "spawn"\n')
    model = str(tmp_path / "m.py")
    assert Pipeline(Overrides()).start_method(model) == StartMethod("spawn", "[tool.exportlens] start_method")
    assert Pipeline(Overrides(start_method="fork")).start_method(model) == StartMethod("fork", "setting")


def test_the_editor_setting_in_both_spellings() -> None:
    settings, problems = parse({"startMethod": "spawn"})
    assert problems == [] and settings.start_method == "spawn"
    assert overrides(settings).start_method == "spawn"
    assert overrides(parse({})[0]).start_method is None  # unset: the environment, then pyproject
    settings, problems = parse({"start_method": "vfork"})
    assert settings.start_method == "auto" and len(problems) == 1 and "start_method" in problems[0]


def test_ending_a_job_on_windows_takes_its_tree_without_signals() -> None:
    from exportlens.core.isolation.procs import signal_group

    ran: list[list[str]] = []
    signal_group(4242, platform="win32", run=lambda argv, **kw: ran.append(argv))
    assert ran == [["taskkill", "/F", "/T", "/PID", "4242"]]
