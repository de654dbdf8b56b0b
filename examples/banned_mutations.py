"""Mutations export bans, several targets in one file with the decorator."""

import torch
from torch import nn

import exportlens


@exportlens.target(example_args=(torch.randn(2, 3),))
class TransposeInPlace(nn.Module):
    def forward(self, x):
        x.transpose_(0, 1)
        return x + 1


@exportlens.target(example_args=(torch.randn(3),))
class TrainableUpdate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(3))

    def forward(self, x):
        self.weight.add_(x)
        return x * self.weight


@exportlens.target(example_args=(torch.randn(3),))
class RunningMean(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mean = torch.zeros(3)

    def forward(self, x):
        self.mean = 0.9 * self.mean + 0.1 * x
        return x - self.mean
