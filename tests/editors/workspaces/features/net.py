"""The target: a Block from layers.py, with a dynamic batch."""

import torch
from layers import Block
from torch.export import Dim

batch = Dim("batch", min=2, max=64)

model = Block()
example_args = (torch.randn(4, 8),)
dynamic_shapes = {"x": {0: batch}}
