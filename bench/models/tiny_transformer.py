"""A ~200-line local model for timing the hover index: a small pre-norm transformer
with in-file submodules, buffers, an in-place buffer update and dynamic shapes."""

import math

import torch
from torch import nn
from torch.export import Dim


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return x * self.weight


class Rotary(nn.Module):
    def __init__(self, dim: int, max_len: int = 512) -> None:
        super().__init__()
        inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(max_len).float()
        freqs = torch.outer(t, inv)
        self.register_buffer("cos", freqs.cos(), persistent=False)
        self.register_buffer("sin", freqs.sin(), persistent=False)

    def forward(self, x):
        seq = x.shape[-2]
        cos = self.cos[:seq]
        sin = self.sin[:seq]
        x1, x2 = x[..., ::2], x[..., 1::2]
        rotated = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
        return rotated.flatten(-2)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.rotary = Rotary(self.head_dim)
        self.scale = 1.0 / math.sqrt(self.head_dim)

    def split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def merge(self, x):
        b, h, s, d = x.shape
        return x.transpose(1, 2).reshape(b, s, h * d)

    def forward(self, x, mask):
        q = self.rotary(self.split(self.q(x)))
        k = self.rotary(self.split(self.k(x)))
        v = self.split(self.v(x))
        scores = (q @ k.transpose(-2, -1)) * self.scale
        scores = scores.masked_fill(mask == 0, float("-inf"))
        weights = scores.softmax(-1)
        out = weights @ v
        return self.o(self.merge(out))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        self.dropout = nn.Dropout(0.0)

    def forward(self, x):
        h = nn.functional.silu(self.gate(x)) * self.up(x)
        h = self.dropout(h)
        return self.down(h)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = Attention(dim, heads)
        self.ff_norm = RMSNorm(dim)
        self.ff = FeedForward(dim, hidden)
        self.register_buffer("calls", torch.zeros(1, dtype=torch.long))

    def forward(self, x, mask):
        self.calls.add_(1)
        x = x + self.attn(self.attn_norm(x), mask)
        x = x + self.ff(self.ff_norm(x))
        return x


class Embedding(nn.Module):
    def __init__(self, vocab: int, dim: int) -> None:
        super().__init__()
        self.table = nn.Embedding(vocab, dim)
        self.register_buffer("scale", torch.tensor(math.sqrt(dim)))

    def forward(self, tokens):
        return self.table(tokens) * self.scale


class Head(nn.Module):
    def __init__(self, dim: int, vocab: int) -> None:
        super().__init__()
        self.norm = RMSNorm(dim)
        self.proj = nn.Linear(dim, vocab, bias=False)

    def forward(self, x):
        x = self.norm(x)
        logits = self.proj(x)
        return logits


class Pooler(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dense = nn.Linear(dim, dim)
        self.act = nn.Tanh()

    def forward(self, x, lengths):
        idx = (lengths - 1).clamp(min=0)
        last = x[torch.arange(x.shape[0]), idx]
        return self.act(self.dense(last))


class TinyLM(nn.Module):
    """Embedding, N blocks, a head and a pooler; returns logits, pooled and a count."""

    def __init__(self, vocab: int = 97, dim: int = 32, heads: int = 4, hidden: int = 64, layers: int = 4) -> None:
        super().__init__()
        self.embed = Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim, heads, hidden) for _ in range(layers)])
        self.head = Head(dim, vocab)
        self.pooler = Pooler(dim)
        self.register_buffer("seen", torch.zeros(1, dtype=torch.long))
        self.temperature = nn.Parameter(torch.ones(1), requires_grad=False)

    def causal_mask(self, seq: int, device: torch.device) -> torch.Tensor:
        return torch.tril(torch.ones(seq, seq, device=device)).view(1, 1, seq, seq)

    def forward(self, tokens, lengths, *, extra=None):
        b, s = tokens.shape
        self.seen.add_(b)
        mask = self.causal_mask(s, tokens.device)
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, mask)
        logits = self.head(x) / self.temperature
        pooled = self.pooler(x, lengths)
        if extra is not None:
            pooled = pooled + extra
        return logits, pooled


def _unused_helper(a, b):
    """Code hover knows nothing about: every position here must answer None fast."""
    total = 0
    for i in range(a):
        for j in range(b):
            total += i * j
    return total


def _another_helper(text: str) -> str:
    words = text.split()
    words = [w.capitalize() for w in words]
    return " ".join(words)


class Unused(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x)


batch = Dim("batch", min=1, max=64)
seq = Dim("seq", min=2, max=256)

model = TinyLM()
example_args = (torch.randint(0, 97, (2, 16)), torch.tensor([16, 9]))
example_kwargs = {"extra": torch.zeros(2, 32)}
dynamic_shapes = {
    "tokens": {0: batch, 1: seq},
    "lengths": {0: batch},
    "extra": {0: batch},
}
