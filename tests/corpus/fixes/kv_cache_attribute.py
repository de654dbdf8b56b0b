"""A decoder step that keeps its last keys as a plain tensor attribute."""

import torch
from torch import nn


class CachedStep(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.key = nn.Linear(8, 8)
        self.cache = torch.zeros(4, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = self.key(x)
        self.cache[: k.shape[0]] = k
        return self.cache.sum(0)


model = CachedStep()
example_args = (torch.randn(4, 8),)
