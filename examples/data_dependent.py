"""Branches on tensor values: export cannot trace them (data-dependent).
Both guards are reported at once, each at its own line."""

import torch
from torch import nn


class Gate(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x = x + 1
        if x.max() > 3:
            x = x * 2
        return x


model = Gate()
example_args = (torch.randn(4),)
