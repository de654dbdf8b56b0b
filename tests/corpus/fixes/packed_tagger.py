"""A sequence tagger that packs its padded batch for the LSTM (pytorch issue 171978)."""

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class Tagger(nn.Module):
    def __init__(self, dim: int = 8, hidden: int = 16, tags: int = 4) -> None:
        super().__init__()
        self.lstm = nn.LSTM(dim, hidden, batch_first=True)
        self.out = nn.Linear(hidden, tags)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        y, _ = self.lstm(packed)
        y, _ = pad_packed_sequence(y, batch_first=True, total_length=x.shape[1])
        return self.out(y)


model = Tagger()
example_args = (torch.randn(3, 6, 8), torch.tensor([6, 4, 2]))
