"""An nn.TransformerEncoder classifier (the PyTorch examples' shape)."""

import math

import torch
from torch import Tensor, nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, max_len: int = 64) -> None:
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.pe[: x.size(0)]


class TransformerClassifier(nn.Module):
    def __init__(self, ntoken: int = 32, d_model: int = 8, nhead: int = 2, d_hid: int = 16, nlayers: int = 2, nclass: int = 3) -> None:
        super().__init__()
        self.embedding = nn.Embedding(ntoken, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout=0.0)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, nclass)

    def forward(self, src: Tensor, src_key_padding_mask: Tensor) -> Tensor:
        x = self.pos_encoder(self.embedding(src))
        x = self.transformer_encoder(x, src_key_padding_mask=src_key_padding_mask)
        return self.head(x.mean(dim=0))
