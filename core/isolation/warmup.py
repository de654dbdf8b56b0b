"""The warm-up: the tiny export the worker runs once after importing torch, and that
each standby job process (``standby``) runs while it waits, so an export starts hot.
"""

from __future__ import annotations

import sys


def warm_up() -> str:
    """Run once in the worker after importing torch: one tiny export, and the job
    module imported, so the first job starts hot. Returns torch's version."""
    import torch

    from exportlens.core.export import libraries

    # Nothing the zygote runs may start the OpenMP pool (see ``exportlens.core.isolation.zygote``).
    torch.set_num_threads(1)
    libraries.survey()  # the installed folders: no project folder is on sys.path yet
    # Before any model library is imported (here or in a job): one that binds
    # ``safetensors.safe_open`` or torch's functions at its import binds these.
    from exportlens.core.export.weights import install

    install()
    prewarm()
    _stop_tqdm_monitor()
    # Imported once here, shared by every fork. The job imports the extraction and
    # the program encoder only after a successful export; imported there, each job
    # paid for them and for the torch internals they pull in
    # (docs/decisions/0001-fork-from-a-warm-zygote.md).
    import exportlens.core.export.extract  # noqa: F401
    import exportlens.core.export.job  # noqa: F401
    import exportlens.core.export.mutations  # noqa: F401 - the eager run of a failed export
    import exportlens.core.serde.encode  # noqa: F401

    return str(torch.__version__)


def _stop_tqdm_monitor() -> None:
    """The tiny export shows a tqdm bar (torch.fx's interpreter), and tqdm starts a
    monitor thread with the first bar: a fork made while it runs would copy its lock
    (``tqdm._lock``) held, should it be at that moment, and every bar of that job would
    wait for it forever. The monitor only tunes how often a bar redraws."""
    std = sys.modules.get("tqdm.std")
    if std is None:
        return
    std.tqdm.monitor_interval = 0  # no monitor in the worker, nor in its jobs
    monitor = std.tqdm.monitor
    if monitor is not None:
        monitor.exit()
        std.tqdm.monitor = None


def prewarm() -> None:
    """One tiny export with a dynamic dim, a parameter and a buffer (tiny tensors
    only: below the parallel grain size, so no OpenMP pool starts)."""
    import torch

    class Warm(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(4))
            self.register_buffer("count", torch.zeros(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x * self.weight) + self.count  # type: ignore[operator]

    batch = torch.export.Dim("batch", min=2)
    ep = torch.export.export(Warm(), (torch.ones(3, 4),), dynamic_shapes=({0: batch},))
    ep.run_decompositions({})
