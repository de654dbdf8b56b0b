"""A local helper module: editing it invalidates the models that import it."""

import torch
from torch import nn


class Residual(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, x):
        return x + torch.relu(self.linear(x))
