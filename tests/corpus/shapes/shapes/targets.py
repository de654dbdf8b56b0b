"""Three targets, each with its own dynamic_shapes mistake."""

import torch
from torch.export import Dim

import exportlens
from shapes.layers import PairSum, Pooled, Positional


@exportlens.target(dynamic_shapes={"x": {1: Dim("seq", max=64)}})
def positional():
    return Positional(), (torch.randn(2, 8, 4),)


@exportlens.target(dynamic_shapes={"x": {1: Dim("seq", max=32)}})
def pooled():
    return Pooled(), (torch.randn(2, 8, 4),)


@exportlens.target(
    dynamic_shapes={"pair": {0: Dim("batch")}},
)
def pair_sum():
    return PairSum(), ((torch.randn(2, 4), torch.randn(2, 4)),)
