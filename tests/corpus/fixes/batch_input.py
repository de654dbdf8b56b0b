"""Declares the encoder of blocks/encoder.py with a batch as the loader makes it."""

import torch
from blocks.batch import TokenBatch
from blocks.encoder import BatchEncoder

model = BatchEncoder()
example_args = (TokenBatch(torch.randint(0, 32, (2, 6)), torch.ones(2, 6)),)
