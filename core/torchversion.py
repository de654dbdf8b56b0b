"""Which torch exportlens supports, and the torch a pinned extra needs; torch-free.

exportlens runs in the user's environment, with the user's torch: its results are
that torch's exports. The range below is what ``scripts/compat`` proves, one venv per
version built from the registry (docs/compatibility.md has its table), and it is the
dependency ``pyproject.toml`` declares, so ``pip install exportlens`` keeps a torch in
it. A torch outside it is said once at start (``exportlens check``, the language
server's notice) instead of running exports the range was never tested with.

The version is read from the installed metadata (``importlib.metadata``), never by
importing torch: the CLI's front end and the language server never import it. The
server asks before every export, so a wheel's version is read from its METADATA's
headers by hand (``core/disk/states.metadata_fields``), not through importlib's email
parser, which read torch's whole description (~1 ms, a few under load, of every
save); a torch installed or replaced while the server runs is seen at once. The
job process, which has torch imported, reaches torch's private APIs through
``exportlens.core.torchcompat``, which builds on this module.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys

from exportlens.core.disk.states import metadata_fields

LOWEST = (2, 10)  # the oldest minor release scripts/compat proves
BELOW = (2, 16)  # the first minor release not yet proven
SPEC = f"torch>={LOWEST[0]}.{LOWEST[1]},<{BELOW[0]}.{BELOW[1]}"  # as pyproject.toml declares it (tests compare)
PINNED = "2.13.0"  # the CPU build scripts/setup installs for the project's own .venv, and CI runs

# Extras whose compiled parts are built against one torch minor release and which
# name no torch version themselves: (distribution, its release) -> the torch it needs.
PAIRED: dict[tuple[str, tuple[int, ...]], tuple[int, ...]] = {("executorch", (1, 5)): (2, 13)}
PAIR_PINS = {"executorch": "executorch==1.5.1"}  # the pin each extra holds in pyproject.toml


def installed() -> str | None:
    """The installed torch's version (``2.13.0+cpu``), or None when it is not installed."""
    return _distribution_version("torch")


def release(version: str) -> tuple[int, ...]:
    """The release numbers of a version string: ``2.15.0+cu130`` -> (2, 15, 0),
    ``2.16.0.dev20260101`` -> (2, 16, 0), ``2.10.0a0+git1234`` -> (2, 10, 0)."""
    match = re.match(r"\d+(?:\.\d+)*", version.strip())
    return tuple(int(p) for p in match.group(0).split(".")) if match else ()


def supported(version: str) -> bool:
    return LOWEST <= release(version)[:2] < BELOW


def problem(version: str | None = None) -> str | None:
    """Why exports cannot run with this environment's torch, as one sentence for the
    user; None when its torch is in the supported range. ``version``: the installed
    one by default."""
    version = installed() if version is None else version
    fix = f"`{sys.executable} -m pip install '{SPEC}'`"
    if version is None:
        return f"torch is not installed in {sys.executable}, and exportlens exports with the environment's own torch: install one with {fix}"
    if supported(version):
        return None
    return (
        f"torch {version} is outside the range exportlens supports ({SPEC}, each version tested; "
        f"docs/compatibility.md), so its exports are not run: install a supported torch with {fix}"
    )


def at_least(major: int, minor: int, version: str | None = None) -> bool:
    """Whether the installed torch (or ``version``) is ``major.minor`` or newer."""
    version = installed() if version is None else version
    return version is not None and release(version)[:2] >= (major, minor)


def pairing(distribution: str, torch: str | None = None) -> str | None:
    """Why the installed ``distribution`` (an extra such as ``executorch``) cannot run
    with this torch, with the command that pairs them; None when they match or when
    nothing is known of the pair."""
    own = _distribution_version(distribution)
    torch = installed() if torch is None else torch
    if own is None or torch is None:
        return None
    needs = PAIRED.get((distribution, release(own)[:2]))
    if needs is None or release(torch)[:2] == needs:
        return None
    wanted = f"{needs[0]}.{needs[1]}"
    pin = PAIR_PINS.get(distribution, f"{distribution}=={own}")
    return (
        f"{distribution} {own} is built against torch {wanted} and this environment has torch {torch}: "
        f"lowering needs the matching torch, in an environment of its own if your models need this one: "
        f"`{sys.executable} -m pip install 'torch=={wanted}.*' '{pin}'`"
    )


def _distribution_version(name: str) -> str | None:
    try:
        found = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    folder = getattr(found, "_path", None)  # a PathDistribution's dist-info (egg-info) folder
    version = metadata_fields(str(folder)).get("Version") if folder is not None else None
    return version or found.version  # egg-info (PKG-INFO), or no Version header: as importlib reads it
