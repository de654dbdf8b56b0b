"""Strict mode traces with TorchDynamo: a call it cannot trace is `unsupported`."""

import torch
from torch import nn


class Logged(nn.Module):
    def forward(self, x):
        torch._dynamo.graph_break()
        return x + 1


model = Logged()
example_args = (torch.randn(2),)
strict = True
