"""Several targets in one file, each built from a model module of the package."""

import torch

import exportlens
from speech.encoder import TransformerClassifier
from speech.streaming import Streaming
from speech.tagger import LSTMTagger
from speech.whisper.model import Whisper


@exportlens.target
def whisper():
    return Whisper().eval(), (torch.randn(2, 4, 16), torch.randint(0, 16, (2, 5)))


@exportlens.target
def classifier():
    mask = torch.zeros(2, 6, dtype=torch.bool)
    return TransformerClassifier().eval(), (torch.randint(0, 32, (6, 2)), mask)


@exportlens.target
def tagger():
    return LSTMTagger().eval(), (torch.randint(0, 32, (2, 7)),)


@exportlens.target
def streaming():
    return Streaming().eval(), (torch.randn(2, 5, 8),)
