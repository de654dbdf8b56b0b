"""A GRU language model (the PyTorch word_language_model example's shape)."""

from torch import nn


class RNNModel(nn.Module):
    def __init__(self, ntoken: int = 32, ninp: int = 8, nhid: int = 8, nlayers: int = 2) -> None:
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.GRU(ninp, nhid, nlayers, batch_first=True)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, tokens):
        output, hidden = self.rnn(self.encoder(tokens))
        return self.decoder(output), hidden
