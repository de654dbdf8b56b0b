"""An LSTM tagger: torch's RNNs reassign `_flat_weights` on every call."""

from torch import Tensor, nn


class LSTMTagger(nn.Module):
    def __init__(self, vocab: int = 32, dim: int = 8, tags: int = 5) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim, num_layers=2, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * dim, tags)

    def forward(self, tokens: Tensor) -> Tensor:
        h, _ = self.lstm(self.embed(tokens))
        return self.out(h)
