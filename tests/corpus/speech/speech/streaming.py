"""A streaming encoder: a GRU front end, then a caching block from the layers package."""

from torch import Tensor, nn

from speech.whisper.layers.caching import CachingBlock


class Streaming(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.block = CachingBlock(dim)

    def forward(self, x: Tensor) -> Tensor:
        h, _ = self.rnn(x)
        return self.block(h)
