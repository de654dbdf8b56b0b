"""``extract.dim_names``: each symbol of a real export named by the user's ``Dim``,
in both export modes (their symbols differ: the names must not), derived dims named
through their root, unnamed dims (``Dim.AUTO``/``Dim.DYNAMIC``) left to torch."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from torch.export import Dim

from exportlens.core.export.extract import dim_names


class ThreeInputs(nn.Module):
    def forward(self, x: torch.Tensor, y: dict[str, torch.Tensor], w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.sum(-1), y["a"] * 2, w[:, 1:]


def export(strict: bool) -> torch.export.ExportedProgram:
    batch = Dim("batch", max=32)
    width = Dim("width", min=2, max=64)
    args = (torch.randn(2, 10, 16), {"a": torch.randn(2, 3)}, torch.randn(2, 9))
    shapes = {"x": {0: batch, 1: Dim("seq", min=2, max=512)}, "y": {"a": {0: batch, 1: Dim.AUTO}}, "w": {0: Dim.DYNAMIC, 1: 2 * width + 1}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(ThreeInputs(), args, dynamic_shapes=shapes, strict=strict).run_decompositions({})


def shapes(ep: torch.export.ExportedProgram) -> dict[str, list[str]]:
    return {n.name: [str(d) for d in n.meta["val"].shape] for n in ep.graph.nodes if n.op == "placeholder"}


@pytest.mark.parametrize("strict", [False, True])
def test_symbols_get_the_users_dim_names(strict: bool) -> None:
    ep = export(strict)
    names = dim_names(ep)
    assert sorted(names.values()) == ["batch", "seq", "width"]
    by_input = shapes(ep)
    named = {k: [names.get(d, d) for d in v] for k, v in by_input.items()}
    x, y, w = named.values()
    assert x == ["batch", "seq", "16"]
    assert y[0] == "batch" and y[1] not in names.values()  # Dim.AUTO: torch's symbol stays
    assert w[0].startswith("s")  # Dim.DYNAMIC has no name either
    # The derived dim is an expression over its root, which carries the root's name.
    [root] = [s for s, n in names.items() if n == "width"]
    assert root in w[1] and "*" in w[1]


def test_no_dynamic_shapes_no_names() -> None:
    ep = torch.export.export(nn.Linear(4, 2), (torch.randn(3, 4),))
    assert dim_names(ep) == {}
