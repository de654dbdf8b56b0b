"""Shared helpers: run the real ``exportlens`` command in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, Mapping

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def pytest_report_header() -> list[str]:
    """Which start method the session's workers use: ``EXPORTLENS_START_METHOD=spawn``
    runs the worker, server and CLI tests with every job a fresh interpreter (the
    path macOS and Windows take); tests of what only fork has name fork themselves.
    And what their supervision has: ``EXPORTLENS_SUPERVISION=portable`` runs it
    without select on pipes, /proc and prctl (``capabilities``)."""
    from exportlens.core.isolation import capabilities
    from exportlens.core.isolation.startmethod import resolve

    return [f"exportlens start method: {resolve()}", *(f"exportlens supervision: {line}" for line in capabilities.describe())]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test marked ``needs_proc`` checks a feature made of ``/proc`` or ``prctl``
    (hot pages, a job's wait for a CPU, killing strays orphaned outside the job's
    process group, a job dying with its worker; not the memory cap, which is psutil's): where the supervision has none (``EXPORTLENS_SUPERVISION=portable``,
    as on macOS and Windows) the feature does not exist, and the test says so as its skip reason."""
    from exportlens.core.isolation import capabilities

    _skip_switched_off_speedups(items)
    if capabilities.PROC_ROOT is not None and capabilities.PRCTL:
        return
    for item in items:
        marker = item.get_closest_marker("needs_proc")
        if marker is not None:
            what = marker.args[0] if marker.args else "a feature read from /proc"
            item.add_marker(pytest.mark.skip(reason=f"{what}: none without /proc and prctl (as on macOS and Windows; EXPORTLENS_SUPERVISION=portable)"))


def _skip_switched_off_speedups(items: list[pytest.Item]) -> None:
    """A test marked ``needs_speedup(name)`` checks what that speed-up of the worker
    does (``core/isolation/speedups``): where the environment switches it off
    (``EXPORTLENS_SPEEDUPS=off``, the CI row that runs the core alone, or its own
    variable) there is nothing to check, and the test says so as its skip reason."""
    from exportlens.core.isolation.speedups import plugins

    states = dict(plugins.states())
    for item in items:
        marker = item.get_closest_marker("needs_speedup")
        if marker is None:
            continue
        for name in marker.args:
            if not states[name].on and "$EXPORTLENS_" in states[name].why:
                item.add_marker(pytest.mark.skip(reason=f"checks the {name} speed-up, switched {states[name].why}"))
                break


def as_a_shell_starts_it() -> None:
    """For ``preexec_fn``, in a child a test stops with Ctrl-C: SIGINT unblocked and at
    its default, as a shell starts a foreground job. An ignored or blocked SIGINT is
    inherited across exec from whatever the test process inherited (a suite started
    in the background by a non-interactive shell ignores it) or an earlier test left,
    and Python installs its Ctrl-C handler only over the default."""
    import signal

    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="session", autouse=True)
def session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every CLI run of the session (and every in-process ``ResultCache()``) uses one
    fresh result cache, never the user's real one."""
    directory = tmp_path_factory.mktemp("exportlens-cache")
    previous = os.environ.get("EXPORTLENS_CACHE_DIR")
    os.environ["EXPORTLENS_CACHE_DIR"] = str(directory)
    yield directory
    if previous is None:
        os.environ.pop("EXPORTLENS_CACHE_DIR", None)
    else:
        os.environ["EXPORTLENS_CACHE_DIR"] = previous


@pytest.fixture(scope="session", autouse=True)
def session_trust(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's own configuration folder (``$EXPORTLENS_CONFIG_DIR``, never the
    user's ``~/.config``), whose trust record trusts what the tests open, as a user
    would with ``exportlens trust``: the repository (examples, the editors'
    workspaces) and the temporary folders. Every server a test starts -- through
    pytest-lsp, a socket, or an editor -- inherits it; a test of trust itself points
    its server at another folder."""
    from exportlens.core.project import trust

    directory = tmp_path_factory.mktemp("exportlens-config")
    previous = os.environ.get(trust.ENV)
    os.environ[trust.ENV] = str(directory)
    for folder in (ROOT, tmp_path_factory.getbasetemp(), Path(tempfile.gettempdir())):
        trust.trust(folder)
    yield directory
    if previous is None:
        os.environ.pop(trust.ENV, None)
    else:
        os.environ[trust.ENV] = previous


def run_cli(*args: str, cwd: Path | str = ROOT, timeout: float = 900, env: Mapping[str, str | None] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m exportlens ARGS``; ``env`` adds variables (None removes one)."""
    full_env = dict(os.environ, PYTHONWARNINGS="ignore")
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    return subprocess.run(
        [sys.executable, "-m", "exportlens", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


def check_json(*paths: str, cwd: Path | str = ROOT, extra: tuple[str, ...] = (), env: Mapping[str, str | None] | None = None) -> tuple[int, dict[str, Any]]:
    proc = run_cli("check", "--format", "json", *extra, *paths, cwd=cwd, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)  # stdout holds the JSON document only


def torch_text(signature: dict[str, Any]) -> str:
    """The JSON signature printed the way ``print(ep.graph_signature)`` prints."""
    ins = []
    for s in signature["inputs"]:
        target = "" if s["target"] is None else f" target='{s['target']}'"
        persistent = "" if "persistent" not in s else f" persistent={s['persistent']}"
        ins.append(f"{s['name']}: {s['kind']}{target}{persistent}")
    outs = []
    for s in signature["outputs"]:
        target = "" if s["target"] is None else f" target='{s['target']}'"
        outs.append(f"{s['name']}: {s['kind']}{target}")
    return "\n# inputs\n" + "\n".join(ins) + "\n\n# outputs\n" + "\n".join(outs) + "\n"


def session_members(sid: int) -> list[str]:
    """Processes still in session ``sid`` (nvim's: the server and its workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(f"{entry.name}: {cmdline}")
    return found
