"""A dynamic batch declared for the first input only."""

import torch
from torch import nn
from torch.export import Dim


class Scorer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + bias.sum()


batch = Dim("batch", min=2, max=64)
model = Scorer()
example_args = (torch.randn(8, 4), torch.randn(3))
dynamic_shapes = {"x": {0: batch}}
