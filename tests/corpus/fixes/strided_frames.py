"""Audio frames taken every `hop` steps, the hop read from a tensor."""

import torch
from torch import nn


class Framer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 4)

    def forward(self, frames: torch.Tensor, hop: torch.Tensor) -> torch.Tensor:
        step = hop.item()
        picked = frames[::step]
        return self.proj(picked)


model = Framer()
example_args = (torch.randn(12, 16), torch.tensor(3))
