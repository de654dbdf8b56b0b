"""LayerDrop (skipping layers at random in training), exported with strict=True."""

import random

import torch
from torch import nn


class LayerDropStack(nn.Module):
    def __init__(self, p: float = 0.1) -> None:
        super().__init__()
        self.p = p
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            if random.uniform(0, 1) < self.p * 0:
                continue
            x = torch.relu(layer(x))
        return x


model = LayerDropStack()
example_args = (torch.randn(2, 8),)
strict = True
