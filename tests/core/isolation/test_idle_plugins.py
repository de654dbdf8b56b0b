"""The zygote's idle moments with the speed-ups' plug-ins (``hooks.SpeedUp``,
``speedups/plugins``), without a worker: what idle work each leaves, and that an idle
worker does not go round its loop with nothing to do."""

from __future__ import annotations

import pytest

from exportlens.core.export import library_units
from exportlens.core.isolation.speedups import fakecache, plugins, preload


class IdleWorker:
    """A worker with no request waiting."""

    exiting = False

    def __init__(self) -> None:
        self.dropped = 0

    def input_waiting(self) -> bool:
        return False

    def drop_standbys(self, forks_only: bool = False) -> None:
        self.dropped += 1


def _idle_once(speedups: list, worker: IdleWorker) -> bool:
    """One pass of ``Zygote.idle_work`` over the plug-ins: whether one did something."""
    for speedup in speedups:
        did, why = speedup.idle(worker, preload.IDLE_S + 1)
        assert why is None
        if did:
            return True
    return False


def test_library_units_are_learned_while_idle_with_preloading_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decision 0010: library units have no switch of their own; before a6d1fe5 the
    worker learned them while idle with ``EXPORTLENS_PRELOAD=0`` too."""
    learned: list[bool] = []
    monkeypatch.setattr(preload, "ENABLED", False)
    monkeypatch.setattr(fakecache, "ENABLED", False)
    monkeypatch.setattr(library_units, "learn", lambda: learned.append(True))
    preloader = preload.Preloader(None, lambda message: None)
    speedups = plugins.plug_ins(preloader)
    worker = IdleWorker()
    assert _idle_once(speedups, worker)
    assert learned == [True]
    assert not _idle_once(speedups, worker)  # once: then nothing is left to do
    assert not preloader.pending and not preloader.modules  # and nothing preloaded


def test_a_full_fake_cache_leaves_no_idle_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Questions that can no longer be kept (``MAX_ENTRIES`` reached) must not stay
    wanted: the idle loop would call ``idle`` again at once, for ever (busy-wait)."""
    from exportlens.core.torchcompat import FakeTensorMode

    monkeypatch.setattr(fakecache, "MAX_ENTRIES", len(FakeTensorMode.cache))
    speedup = fakecache.AnswerSpeedUp()
    speedup.answers.pending.extend([["aten", "add", "Tensor", None, [], {}]] * 3)
    worker = IdleWorker()
    speedup.idle(worker, 0.0)
    assert speedup.idle(worker, 0.0) == (False, None)
    assert not speedup.answers.wanted
