"""A file that does not compile (syntax-error)."""

import torch


class Broken(torch.nn.Module):
    def forward(self, x)
        return x
