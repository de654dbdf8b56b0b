"""Dynamic shapes that hold: the signature shows symbolic dimensions and ranges."""

import torch
from torch import nn
from torch.export import Dim


class Attention(nn.Module):
    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        return self.proj(scores.softmax(-1) @ v)


model = Attention()
example_args = (torch.randn(2, 10, 16),)
dynamic_shapes = {"x": {0: Dim("batch", max=32), 1: Dim("seq", min=2, max=512)}}
