"""A model that allocates without bound (out-of-memory under the memory cap)."""

import torch
from torch import nn

hoard = []


class Hog(nn.Module):
    def forward(self, x):
        while True:
            hoard.append(bytearray(64 * 1024 * 1024))
        return x


model = Hog()
example_args = (torch.randn(2),)
