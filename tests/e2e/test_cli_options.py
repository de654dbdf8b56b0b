"""Every numeric option of the CLI is a finite number in its range: ``nan``, ``inf``,
zero, negatives and absurd sizes are usage errors (exit 2) that name the option,
never a check that runs without a limit (``--timeout nan`` let a hanging model run forever)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exportlens.cli import MAX_JOBS, run
from exportlens.core.project.settings import MEMORY_RANGE_MB, TIMEOUT_RANGE_S
from tests.conftest import run_cli

pytestmark = pytest.mark.adversarial

BAD: list[tuple[str, str]] = [
    *[("--timeout", v) for v in ("nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e309", "0", "-0", "-1", "0.01", str(TIMEOUT_RANGE_S[1] * 2), "", "ten", "0x10")],
    *[("--memory-mb", v) for v in ("nan", "inf", "0", "-64", str(MEMORY_RANGE_MB[0] - 1), str(MEMORY_RANGE_MB[1] + 1), "1.5", "1e3", "10" * 400, "lots")],
    *[("--jobs", v) for v in ("nan", "inf", "0", "-1", str(MAX_JOBS + 1), "1.5", "many")],
    *[("-j", v) for v in ("0", "nan")],
]


@pytest.mark.parametrize("command", ["check", "snapshot"])
@pytest.mark.parametrize("option, value", BAD, ids=[f"{o}={v}" for o, v in BAD])
def test_a_bad_number_is_a_usage_error_naming_the_option(command: str, option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run([command, f"{option}={value}", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    name = "--jobs" if option == "-j" else option
    assert f"argument {name}" in err and f"got {value!r}" in err, err


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-5"])
def test_show_refuses_a_bad_timeout_too(value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["show", f"--timeout={value}", str(tmp_path / "m.py")]) == 2
    assert "argument --timeout" in capsys.readouterr().err


GOOD: list[tuple[str, str]] = [
    ("--timeout", "0.5"),
    ("--timeout", "600"),
    ("--timeout", str(TIMEOUT_RANGE_S[1])),
    ("--memory-mb", "2048"),
    ("--memory-mb", str(MEMORY_RANGE_MB[0])),
    ("--jobs", "1"),
    ("--jobs", str(MAX_JOBS)),
]


@pytest.mark.parametrize("option, value", GOOD, ids=[f"{o}={v}" for o, v in GOOD])
def test_a_good_number_passes_to_the_check(option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The options are accepted: the check goes on to find the PATH missing (also 2, another message).
    assert run(["check", f"{option}={value}", str(tmp_path / "missing.py")]) == 2
    err = capsys.readouterr().err
    assert "error: argument" not in err and "missing.py" in err, err


@pytest.mark.parametrize("address", ["127.0.0.1:99999", "127.0.0.1:65536", "127.0.0.1:²", "127.0.0.1:-1", "127.0.0.1:", "nonsense"])
def test_serve_refuses_a_port_out_of_range(address: str) -> None:
    # In a child process: the server sets up its process's logging. (Port 0 is any free port.)
    proc = run_cli("serve", "--tcp", address, timeout=120)
    assert proc.returncode == 2 and "--tcp expects HOST:PORT with a port from 0 (any free port) to 65535" in proc.stderr, proc.stderr
