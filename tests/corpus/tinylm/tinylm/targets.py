"""Several targets in one file, each built from a model module of the package."""

import torch

import exportlens
from tinylm.gpt import GatedGPT
from tinylm.rnn import RNNModel


@exportlens.target
def rnn():
    return RNNModel(), (torch.randint(0, 32, (2, 5)),)


@exportlens.target
def gated():
    return GatedGPT(), (torch.randint(0, 32, (2, 8)),)
