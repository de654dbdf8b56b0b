"""Shared helpers: run the real ``exportlens`` command in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def run_cli(*args: str, cwd: Path | str = ROOT, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run(
        [sys.executable, "-m", "exportlens", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def check_json(*paths: str, cwd: Path | str = ROOT, extra: tuple[str, ...] = ()) -> tuple[int, dict[str, Any]]:
    proc = run_cli("check", "--format", "json", *extra, *paths, cwd=cwd)
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
