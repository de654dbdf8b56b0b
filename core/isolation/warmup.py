"""Warming up: what the worker runs once after importing torch, and what each standby
job process runs while it waits, so that an export starts hot."""

from __future__ import annotations

from exportlens.core.isolation.jobprocess import job_function

__all__ = ["prewarm", "warm_up"]


def warm_up() -> str:
    """Import torch and run one tiny export, so the first job starts hot."""
    import torch

    # Nothing the zygote runs may start the OpenMP pool (see ``exportlens.core.isolation.zygote``).
    torch.set_num_threads(1)
    prewarm()
    job_function()  # import the job module (and what it imports) once, here
    return str(torch.__version__)


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
