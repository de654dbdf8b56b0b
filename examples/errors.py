"""Models that fail when run (eager-error), with a type export cannot flatten
(unsupported-type), and a malformed declaration (target-error)."""

import torch
from torch import nn

import exportlens


@exportlens.target(example_args=(torch.randn(3, 3),))
class ShapeMismatch(nn.Module):
    def forward(self, x):
        return x @ torch.ones(5, 5)


class Box:
    def __init__(self, value):
        self.value = value


@exportlens.target(example_args=(torch.randn(2),))
class ReturnsObject(nn.Module):
    def forward(self, x):
        return Box(x * 2)


@exportlens.target(example_args=[torch.randn(2)])
class ListArgs(nn.Module):
    def forward(self, x):
        return x
