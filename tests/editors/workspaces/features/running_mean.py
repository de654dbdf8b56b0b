"""A tensor attribute assigned in forward: export drops the update (a quick fix registers it)."""

import torch
from torch import nn


class RunningMean(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mean = torch.zeros(3)

    def forward(self, x):
        self.mean = 0.9 * self.mean + 0.1 * x
        return x - self.mean


model = RunningMean()
example_args = (torch.randn(3),)
