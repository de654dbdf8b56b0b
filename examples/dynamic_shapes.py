"""A dimension declared dynamic that the code specialises (constraint-violation)."""

import torch
from torch import nn
from torch.export import Dim

batch = Dim("batch", min=2, max=64)


class Reshaper(nn.Module):
    def forward(self, x):
        if x.shape[0] == 4:
            return x.view(2, -1)
        return x


model = Reshaper()
example_args = (torch.randn(4, 3),)
dynamic_shapes = {"x": {0: batch}}
