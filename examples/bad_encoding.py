"""A model file whose bytes are not valid UTF-8 (syntax-error, as Python reports it)."""

import torch

GREETING = "café"

model = torch.nn.Identity()
example_args = (torch.randn(2),)
