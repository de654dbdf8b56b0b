"""Several targets in one file: a decorated class and a decorated factory."""

import torch
from torch import nn
from torch.export import Dim

import exportlens


@exportlens.target(example_args=lambda: (torch.randn(4, 8),), name="encoder")
class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(self.embed(x))


class Scaler(nn.Module):
    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x, *, bias=None):
        y = x * self.factor
        return y if bias is None else y + bias


@exportlens.target(dynamic_shapes={"x": {0: Dim("n")}, "bias": None})
def scaler():
    return Scaler(2.0), (torch.randn(5),), {"bias": torch.ones(1)}
