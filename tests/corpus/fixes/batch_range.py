"""A reshape that only holds for batches of at most 8, declared up to 64."""

import torch
from torch import nn
from torch.export import Dim


class Gated(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 8:
            return x * 2
        return x + 1


batch = Dim("batch")
model = Gated()
example_args = (torch.randn(4, 3),)
dynamic_shapes = {"x": {0: batch}}
