"""Each speed-up's switch, and what ``exportlens version`` and the worker's log say of it.

A speed-up is on unless its variable is ``0``, ``EXPORTLENS_SPEEDUPS=off`` turns every
one off, or it gains nothing on this Python or platform (``why`` says which). The
variables are read once, at import: the pool, the worker and its jobs inherit them.
Torch-free.
"""

from __future__ import annotations

import os
from typing import NamedTuple

ALL = "EXPORTLENS_SPEEDUPS"


class State(NamedTuple):
    on: bool
    why: str


def switched_off(variable: str, environ: dict[str, str] | None = None) -> str | None:
    """Why the environment turns the speed-up of ``variable`` off, or None."""
    env = os.environ if environ is None else environ
    if env.get(ALL, "").strip().lower() in ("off", "0"):
        return f"off: ${ALL}={env[ALL].strip()}"
    if env.get(variable, "1").strip() == "0":
        return f"off: ${variable}=0"
    return None


def decide(variable: str, lacking: str | None = None, gains: str = "") -> State:
    """The state of a speed-up switched by ``variable``: off as the environment says,
    else off where the platform lacks what it needs (``lacking`` says what), else on."""
    off = switched_off(variable)
    if off is not None:
        return State(False, off)
    if lacking is not None:
        return State(False, f"off: {lacking}")
    return State(True, f"on{': ' + gains if gains else ''} (${variable}=0 turns it off)")
