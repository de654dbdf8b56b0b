"""A model that crashes the process (worker-crash); other files are still checked."""

import ctypes

import torch
from torch import nn


class Crash(nn.Module):
    def forward(self, x):
        ctypes.string_at(0)
        return x


model = Crash()
example_args = (torch.randn(2),)
