"""The moments of the zygote's loop at which a speed-up may act: ``SpeedUp``.

The isolation core exports without any speed-up: the zygote takes a request, starts a
job for it, supervises it and sends its result. A speed-up (``speedups/``) plugs in by
overriding these hooks, each a no-op here, and the zygote calls every plug-in at each
moment (``Zygote.speedups``). What a hook may ask of the worker is ``Worker``'s.

The standby is the one speed-up that is not a ``SpeedUp``: it starts the jobs
themselves, so it wraps the core's job starter (``starters.JobStarter``,
``speedups/standby.ForkStandby``). The frame stack wraps the calls of ``main``
(``speedups/framestack.call``). Which are on, and why: ``speedups/switches``.
Torch-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from exportlens.core.isolation.messages import Imported
    from exportlens.core.model.request import ExportRequest


class Lessons(Protocol):
    """What a job taught after its result (``supervise.Attempt`` has them)."""

    imported: Imported | None  # the library modules it imported
    fake_cache: bytes  # the fake-tensor calls it made


class Worker(Protocol):
    """What a hook may ask of the zygote."""

    @property
    def exiting(self) -> bool: ...

    def input_waiting(self) -> bool:
        """Whether a request (or an exit) waits to be read."""
        ...

    def model_text(self, request: ExportRequest) -> str:
        """The text of the request's model file, as its job will run it."""
        ...

    def drop_standbys(self, forks_only: bool = False) -> None:
        """Kill the job processes started ahead: they lack what the worker is about to
        hold (a spawned one too, unless ``forks_only``)."""
        ...


class SpeedUp:
    """One speed-up of the worker. Each hook does nothing unless overridden."""

    name = "speed-up"

    def idle(self, worker: Worker, idle_s: float) -> tuple[bool, str | None]:
        """No request waits and the worker has been idle ``idle_s`` seconds: do some
        work, interrupted when ``worker.input_waiting()``. Whether it did anything
        (the loop then looks at its input again), and why the worker must retire, if
        what it did left it unfit to fork."""
        return False, None

    def idle_timeout(self, idle_s: float) -> float | None:
        """How long the idle worker may wait for input before ``idle`` has work; None: never."""
        return None

    def before(self, worker: Worker, request: ExportRequest, batch: bool) -> str | None:
        """Before ``request`` starts (``batch``: more of its batch wait behind it, so the
        worker has no idle moment before them). Why the worker must retire, if any."""
        return None

    def learn(self, attempt: Lessons, forked: bool) -> None:
        """A job is over: keep what it told (``attempt``) for later ones. ``forked``:
        it was a fork of this worker, not a spawned interpreter."""

    def after_result(self, worker: Worker) -> None:
        """A request's result is sent and its jobs have taught what they know."""
