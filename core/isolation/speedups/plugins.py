"""The speed-ups that are on, as the zygote plugs them in: its fork starter and its ``SpeedUp``s."""

from __future__ import annotations

from exportlens.core.isolation.forking import Forker
from exportlens.core.isolation.hooks import SpeedUp
from exportlens.core.isolation.speedups import fakecache, framestack, hotpages, preload, standby
from exportlens.core.isolation.speedups.switches import State


def states() -> list[tuple[str, State]]:
    """Every speed-up's state here (``switches``), in the order the docs list them."""
    return [
        ("standby job", standby.STATE),
        ("hot pages", hotpages.STATE),
        ("fake-tensor answers", fakecache.STATE),
        ("preloading", preload.STATE),
        ("frame stack", framestack.state()),
    ]


def fork_starter(forker: Forker) -> Forker | standby.ForkStandby:
    """The fork start method's job starter: with a standby where that is on."""
    return standby.ForkStandby(forker) if standby.STATE.on else forker


def plug_ins(preloader: preload.Preloader) -> list[SpeedUp]:
    """The zygote's plug-ins that are on, and preloading's in any case (see below), in
    the order it calls them (after ``fakecache.install``, which turns fake-tensor
    answers off on a torch that lacks them)."""
    found: list[SpeedUp] = []
    if fakecache.ENABLED:
        found.append(fakecache.AnswerSpeedUp())
    # With preloading off too: its idle step still learns the library units the worker
    # holds, which have no switch of their own (docs/decisions/0010-library-units-walked-once.md);
    # the ``Preloader`` then takes no module to import.
    found.append(preload.PreloadSpeedUp(preloader))
    return found
