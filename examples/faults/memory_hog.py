"""A model that allocates without bound (out-of-memory under the memory cap)."""

import torch
from torch import nn

hoard = []


class Hog(nn.Module):
    def forward(self, x):
        for _ in range(64): hoard.append(bytearray(64 << 20))  # 4 GB if the cap failed
        return x


model = Hog()
example_args = (torch.randn(2),)
