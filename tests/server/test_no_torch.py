"""The server process must never import torch: every module, imported in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "server"


def test_no_server_module_imports_torch() -> None:
    modules = sorted(
        "exportlens.server." + ".".join(p.relative_to(SERVER).with_suffix("").parts)
        for p in SERVER.rglob("*.py")
        if p.name != "__init__.py"
    )
    assert "exportlens.server.app" in modules and "exportlens.server.features.diagnostics" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "import exportlens.cli\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "assert not bad, bad\n"
        "print(len(sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
