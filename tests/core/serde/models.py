"""Small real programs for the hostile-input tests: static, dynamic, subgraphs, kwargs.

Each is exported once per process (``program(name)``) and comes with the input spec
the fuzz child rebuilds its example inputs from.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import torch
from torch.export import Dim

from exportlens import program as P


class Static(torch.nn.Module):
    """Parameters, a buffer and a Sequential (targets with a digit part: ``seq.0.weight``)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.register_buffer("scale", torch.full((3,), 2.0))
        self.seq = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.seq(self.lin(x) * self.scale), dim=-1)


class Dynamic(torch.nn.Module):
    """Symbolic sizes: a slice by ``b // 2``, a concatenation ``b + c``, a flatten ``4*(b + c)``."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.lin(x)
        return h[: x.shape[0] // 2], torch.cat([h, y]).reshape(-1)


class Cond(torch.nn.Module):
    """``torch.cond``: two subgraphs, a parameter captured by a branch, a dynamic batch."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda x: x * self.w, lambda x: x - self.w, (x,))


class Kwargs(torch.nn.Module):
    """A keyword input (an ``(args, kwargs)`` in_spec) and an unbacked size (``nonzero``)."""

    def forward(self, x: torch.Tensor, *, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * scale, torch.nonzero(x)


class Sparse(torch.nn.Module):
    """Sparse buffers as Whisper keeps ``alignment_heads``: a COO (not coalesced, with a
    duplicate index) and a CSR, both read by ``forward``."""

    def __init__(self) -> None:
        super().__init__()
        coo = torch.sparse_coo_tensor(torch.tensor([[0, 2, 0], [1, 0, 1]]), torch.tensor([1.5, -2.0, 0.25]), (3, 2))
        self.register_buffer("heads", coo, persistent=False)
        self.register_buffer("mix", torch.tensor([[0.0, 2.0, 0.0], [1.0, 0.0, 3.0]]).to_sparse_csr(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.heads.to_dense().sum() + self.mix.to_dense().sum()


def _spec(t: torch.Tensor) -> dict[str, Any]:
    return {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}


MODELS: dict[str, Any] = {
    "static": (Static, (torch.full((2, 4), 0.5),), {}, None),
    "dynamic": (Dynamic, (torch.full((6, 4), 0.5), torch.full((3, 4), 0.5)), {}, ({0: Dim.AUTO}, {0: Dim.AUTO})),
    "cond": (Cond, (torch.full((5, 3), 0.5),), {}, ({0: Dim.AUTO},)),
    "kwargs": (Kwargs, (torch.full((3, 2), 0.5),), {"scale": torch.full((2,), 2.0)}, None),
    "sparse": (Sparse, (torch.full((2, 3), 0.5),), {}, None),
}


@functools.cache
def program(name: str) -> torch.export.ExportedProgram:
    cls, args, kwargs, dynamic = MODELS[name]
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(cls(), args, kwargs, dynamic_shapes=dynamic, strict=False)


def payload(name: str) -> bytes:
    """The program's bytes with its weights, so ``loads`` needs nothing else."""
    return P.dumps(program(name), weights=True)


def inputs(name: str) -> dict[str, Any]:
    _, args, kwargs, _ = MODELS[name]
    return {"args": [_spec(a) for a in args], "kwargs": {k: _spec(v) for k, v in kwargs.items()}}
