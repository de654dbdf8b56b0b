"""Emacs' eglot connected to a running ``exportlens serve --tcp``, configured as
docs/editors.md shows (``:process`` with ``open-network-stream``, the token in
``:initializationOptions``), in the real ``emacs --batch``.

The scenario is ``emacs/eglot_connect.el``: open a model, wait for its diagnostics,
shut the server down. Emacs and eglot are Debian's emacs-nox and elpa-eglot,
installed by the test set-up when missing; skipped, with the reason, only where
they cannot be installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import EXAMPLES
from tests.editors.terminal_clients import editors
from tests.server.listening import ServerProcess

SCENARIO = Path(__file__).resolve().parent / "emacs" / "eglot_connect.el"
WAIT_S = 240  # the first export warms a worker up on a loaded machine
TOKEN = "emacs-token-0123456789abcdef"


def emacs_with_eglot() -> str:
    """Debian's emacs-nox and elpa-eglot, installed when missing (the terminal client
    tests' kit); skipped, with the reason, only where they cannot be installed."""
    return editors()["EMACS"]


def run_eglot(emacs: str, project: Path, port: int, token: str, tmp_path: Path) -> dict:
    result = tmp_path / "result.json"
    env = dict(
        os.environ,
        HOME=str(tmp_path / "home"),  # no user init, no state in the user's folders
        EXPORTLENS_EMACS_PORT=str(port),
        EXPORTLENS_EMACS_TOKEN=token,
        EXPORTLENS_EMACS_MODEL=str(project / "counter.py"),
        EXPORTLENS_EMACS_RESULT=str(result),
        EXPORTLENS_EMACS_WAIT_S=str(WAIT_S),
    )
    proc = subprocess.run([emacs, "--batch", "-q", "-l", str(SCENARIO)], cwd=project, env=env, capture_output=True, text=True, timeout=WAIT_S + 120)
    assert result.exists(), f"emacs wrote no result (exit {proc.returncode}): {proc.stderr[-3000:]}"
    return json.loads(result.read_text())


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[tuple[str, Path, ServerProcess]]:
    """Emacs, a project holding counter.py, and ``serve --tcp`` on it with TOKEN."""
    emacs = emacs_with_eglot()
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(EXAMPLES / "counter.py", project / "counter.py")
    (tmp_path / "home").mkdir()
    server = ServerProcess("--tcp", "127.0.0.1:0", cwd=project, env={"EXPORTLENS_TOKEN": TOKEN})
    try:
        yield emacs, project, server
    finally:
        server.stop()


def test_eglot_with_the_token_gets_diagnostics(listening: tuple[str, Path, ServerProcess], tmp_path: Path) -> None:
    emacs, project, server = listening
    got = run_eglot(emacs, project, server.address()[1], TOKEN, tmp_path)
    assert got["error"] is None, got
    assert got["published"][0] == {"uri": (project / "counter.py").as_uri(), "codes": ["mutation/buffer"]}, got
    assert server.wait() == 0, server.stderr  # eglot's shutdown and exit ended the session
    assert "Traceback" not in server.stderr and "refused" not in server.stderr, server.stderr


def test_eglot_with_a_wrong_token_is_refused_and_told_why(listening: tuple[str, Path, ServerProcess], tmp_path: Path) -> None:
    emacs, project, server = listening
    got = run_eglot(emacs, project, server.address()[1], TOKEN + "x", tmp_path)
    assert not got["published"], got  # (null: eglot never got as far as a notification)
    assert got["error"] is not None and "wrong token" in got["error"], got
    assert server.proc.poll() is None  # still waiting for a client with the token
    assert server.count("initialize with a wrong token", 1) == 1, server.stderr
