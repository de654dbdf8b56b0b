"""A generator built in training mode: batch norm uses the batch's statistics."""

import torch
from torch import nn


class Generator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU())

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


model = Generator()
example_args = (torch.randn(4, 8),)
