"""A residual block that only adds the update when the update's energy is positive."""

import torch
from torch import nn


class GatedResidual(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.update = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        delta = self.update(x)
        if delta.sum() > 0:
            return x + delta
        else:
            return x - delta


model = GatedResidual()
example_args = (torch.randn(4, 8),)
