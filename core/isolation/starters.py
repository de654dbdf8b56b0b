"""What the zygote asks of whatever starts its job processes: ``JobStarter``.

Two classes start them: ``forking.Forker`` forks the warm zygote, and
``spawning.Spawner`` starts a fresh interpreter (the ``spawn`` start method, and the
files a fork cannot serve). Each holds a *standby*, the next job process started
ahead of its request. The zygote picks one per request and then asks it the same
questions, so their methods share these names; what each does is in its own class.
Torch-free.
"""

from __future__ import annotations

from typing import Protocol

from exportlens.core.isolation.forking import Job
from exportlens.core.model.request import ExportRequest


class JobStarter(Protocol):
    """Starts job processes for one zygote and holds its standby, if any."""

    def start_job(self, request: ExportRequest) -> Job:
        """A new job process for ``request`` (no standby was there to take it)."""
        ...

    def start_standby(self, busy: Job | None = None) -> None:
        """Start the next job process ahead of its request, if there is none and this
        is a good moment (``busy``: the job running beside it, if any)."""
        ...

    def take_standby(self, request: ExportRequest) -> Job | None:
        """Hand ``request`` to the standby, if it can take it; None otherwise."""
        ...

    def drop_standby(self) -> None:
        """Kill the standby, if any (it lacks what the zygote holds now)."""
        ...

    def kept_pids(self) -> tuple[int, ...]:
        """The job processes started and not yet handed a request (the standby)."""
        ...

    def learn_from(self, pid: int) -> None:
        """A job process is over: keep what it told for later ones, if anything."""
        ...
