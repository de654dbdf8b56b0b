"""Channels-first to channels-last, written in place on the input."""

import torch
from torch import nn


class ToChannelsLast(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(3, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.transpose_(0, 1)
        return self.proj(x)


model = ToChannelsLast()
example_args = (torch.randn(3, 5),)
