"""Pairs of frames: the frame axis must be even, so its Dim must be derived."""

import torch
from torch import nn
from torch.export import Dim


class FramePairs(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0] // 2, 2, x.shape[1]).mean(1)


frames = Dim("frames", min=2, max=64)
model = FramePairs()
example_args = (torch.randn(8, 3),)
dynamic_shapes = {"x": {0: frames}}
