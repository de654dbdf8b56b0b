"""A file that fails while it is imported (import-error)."""

import torch

CHANNELS = int("three")

model = torch.nn.Linear(CHANNELS, 2)
example_args = (torch.randn(1, 3),)
