"""A model file that does not compile (syntax-error): a colon is missing."""

import torch


class Broken(torch.nn.Module):
    def forward(self, x)
        return x


model = Broken()
example_args = (torch.randn(2),)
