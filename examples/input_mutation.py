"""In-place updates of a user input and of a frozen parameter: exported as
USER_INPUT_MUTATION and PARAMETER_MUTATION outputs, reported as warnings."""

import torch
from torch import nn


class Normalizer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4), requires_grad=False)

    def forward(self, x):
        x.mul_(2)
        self.scale.mul_(0.5)
        return x * self.scale


model = Normalizer()
example_args = (torch.randn(2, 4),)
