"""Buffer mutation: supported, shown as a BUFFER_MUTATION output (mutation/buffer)."""

import torch
from torch import nn


class Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(1))
        self.register_buffer("scratch", torch.zeros(3), persistent=False)

    def forward(self, x):
        self.steps.add_(1)
        return x + self.steps


model = Counter()
example_args = (torch.randn(3),)
