"""Layers whose code pins a dynamic dimension, or takes a tuple input."""

import torch
from torch import nn


class Positional(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pos = nn.Parameter(torch.zeros(1, 8, 4))

    def forward(self, x):
        return x + self.pos


class Pooled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x).reshape(2, 8 * 4)


class PairSum(nn.Module):
    def forward(self, pair):
        a, b = pair
        return a + b
