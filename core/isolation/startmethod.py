"""How the worker starts a job process: ``fork`` from the warm zygote, or ``spawn``.

``fork`` is the design of ``zygote`` and ``forking``: a job is a copy of a process
that already holds torch, its warm caches and the preloaded libraries, so it starts
in a fraction of an interpreter's time. It needs ``os.fork``, which Windows lacks, and
macOS makes it unsafe once a process holds system frameworks (CPython's
``multiprocessing`` and PyTorch's DataLoader default to spawn there for that reason).
``spawn`` starts each job as a fresh interpreter (``spawning``) that imports torch
and the libraries itself, one started ahead as a standby.

The setting is ``"auto" | "fork" | "spawn"``; ``auto`` is fork on Linux and spawn
elsewhere. Precedence: the CLI flag or editor setting, then
``$EXPORTLENS_START_METHOD``, then ``[tool.exportlens] start_method``, then auto.
Torch-free: the pool resolves it and passes the answer to its workers.

Why fork, measured: docs/decisions/0001-fork-from-a-warm-zygote.md.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

CHOICES: tuple[str, ...] = ("auto", "fork", "spawn")
DEFAULT = "auto"
ENV = "EXPORTLENS_START_METHOD"


def platform_default(platform: str = sys.platform) -> str:
    """``auto``: fork only where it is both available and safe (Linux)."""
    return "fork" if platform.startswith("linux") else "spawn"


@dataclass(frozen=True)
class StartMethod:
    """``method``: "fork" or "spawn"; ``why``: where the choice came from."""

    method: str
    why: str

    def __str__(self) -> str:
        """One line for the server's log and ``exportlens version``."""
        how = "jobs forked from a warm worker" if self.method == "fork" else "each job a fresh process, one started ahead"
        return f"{self.method} ({how}; {self.why})"


def resolve(explicit: str | None = None, project: str | None = None, env: str | None = None, platform: str = sys.platform) -> StartMethod:
    """"fork" or "spawn", and where the choice came from.

    ``explicit``: the CLI flag or editor setting; ``project``: pyproject's; ``env``:
    ``$EXPORTLENS_START_METHOD`` (read from the environment when None). A value that
    is not one of ``CHOICES`` is skipped, as ``auto`` is. ``fork`` where there is no
    fork (Windows) falls back to spawn, and says so.
    """
    env = os.environ.get(ENV) if env is None else env
    for value, source in ((explicit, "setting"), (env, f"${ENV}"), (project, "[tool.exportlens] start_method")):
        value = (value or "").strip().lower()
        if value in ("fork", "spawn"):
            if value == "fork" and platform.startswith("win"):
                return StartMethod("spawn", f"{source} asks for fork, which Windows does not have")
            return StartMethod(value, source)
    return StartMethod(platform_default(platform), f"auto on {platform}")
