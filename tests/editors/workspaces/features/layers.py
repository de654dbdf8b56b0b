"""The model's classes, in their own module: net.py declares the target."""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 16)

    def forward(self, x):
        h = self.proj(x)
        return torch.relu(h)
