"""``exportlens trust`` as users run it (issue 36): trust, list, forget, and what it
says when it cannot; each run in a configuration folder of its own."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli


def test_trust_list_and_forget(tmp_path: Path) -> None:
    env = {"EXPORTLENS_CONFIG_DIR": str(tmp_path / "config")}
    (tmp_path / "repo" / "sub").mkdir(parents=True)
    proc = run_cli("trust", cwd=tmp_path / "repo", env=env)  # default: the current folder
    assert proc.returncode == 0 and f"trusted {tmp_path / 'repo'}" in proc.stdout, proc.stderr
    assert run_cli("trust", "--list", env=env).stdout.splitlines() == [str(tmp_path / "repo")]
    record = tmp_path / "config" / "trusted.json"
    assert record.stat().st_mode & 0o777 == 0o600
    assert json.loads(record.read_text()) == {"version": 1, "folders": [str(tmp_path / "repo")]}

    # Forgetting a subfolder of a trusted folder changes nothing, and says so.
    proc = run_cli("trust", "--forget", str(tmp_path / "repo" / "sub"), env=env)
    assert proc.returncode == 0 and "still trusted as part of" in proc.stderr, proc.stderr
    proc = run_cli("trust", "--forget", str(tmp_path / "repo"), env=env)
    assert proc.returncode == 0 and f"no longer trusted: {tmp_path / 'repo'}" in proc.stdout
    assert run_cli("trust", "--list", env=env).stdout == ""


def test_what_trust_refuses(tmp_path: Path) -> None:
    env = {"EXPORTLENS_CONFIG_DIR": str(tmp_path / "config")}
    proc = run_cli("trust", str(tmp_path / "missing"), env=env)
    assert proc.returncode == 1 and "is not a folder" in proc.stderr
    assert run_cli("trust", "--list", "x", env=env).returncode == 2
    assert run_cli("trust", "--list", "--forget", env=env).returncode == 2

    (tmp_path / "config").mkdir(mode=0o700)
    record = tmp_path / "config" / "trusted.json"
    record.write_text("[]")
    proc = run_cli("trust", "--list", env=env)
    assert proc.returncode == 1 and f"ignoring the trust record {record}" in proc.stderr and "nothing is trusted" in proc.stderr
    proc = run_cli("trust", str(tmp_path), env=env)
    assert proc.returncode == 1 and record.read_text() == "[]"  # never overwritten
