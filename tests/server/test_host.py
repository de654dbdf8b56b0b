"""Features reach the server through ``host.Host``: importing any of them, alone in a
fresh interpreter, imports neither the app (no import cycle to dodge) nor torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[2] / "server"


def _module(path: Path) -> str:
    parts = path.relative_to(SERVER).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("exportlens", "server", *parts))


FEATURES = sorted(_module(p) for p in (SERVER / "features").rglob("*.py")) + ["exportlens.server.exports", "exportlens.server.host"]


def test_the_feature_list_is_complete() -> None:
    assert {"exportlens.server.features.commands", "exportlens.server.features.documents", "exportlens.server.features.hover"} <= set(FEATURES)


@pytest.mark.parametrize("module", FEATURES)
def test_a_feature_imports_neither_the_app_nor_torch(module: str) -> None:
    code = (
        "import importlib, sys\n"
        f"importlib.import_module({module!r})\n"
        "assert 'exportlens.server.app' not in sys.modules, 'imports the app'\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_app_satisfies_the_host_protocol_members() -> None:
    # The type checker proves it where the app registers features; this catches a
    # member renamed on the app when only the tests run.
    from exportlens.server.app import create_server
    from exportlens.server.host import Host

    server = create_server()
    members = {name for name in Host.__dict__ if not name.startswith("_")} | set(Host.__annotations__)
    # Looked up on the class or the instance: reading a property (the workspace) may
    # need an initialized session.
    missing = sorted(name for name in members if not hasattr(type(server), name) and name not in vars(server))
    assert not missing, missing
