"""A model that never returns (timeout): the diagnostic points at the loop."""

import torch
from torch import nn


class Spin(nn.Module):
    def forward(self, x):
        while True: x = x + 0  # the timeout diagnostic points here
        return x


model = Spin()
example_args = (torch.randn(2),)
