"""A fake tensor keeps its recipe until something writes to *it* (issue 29, point 6).

The storages written to were kept by address (``_cdata``); once one was freed, the
allocator handed its address to the next storage made, and a fresh constant built
fake lost its recipe for a write to a tensor gone long before. Its target then fell
back to real weights and said so (``weights_note``): the ``Constants`` target of
``tests/fixtures/weights/idioms.py`` did, in some runs, after the targets before it
initialised their weights in place -- whether it did depended on where the allocator
put the storages.
"""

from __future__ import annotations

import gc

import torch
from torch import nn

from exportlens.core.export.weights.fake import FakeWeights


class Initialised(nn.Module):
    """Weights written in place while they are built (``nn.init``)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(64, 64) for _ in range(20))
        for layer in self.layers:
            nn.init.normal_(layer.weight)


class Constants(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tables = [torch.full((64, 64), 0.5) for _ in range(50)]


def test_a_fake_made_where_a_written_one_was_freed_keeps_its_recipe() -> None:
    weights = FakeWeights(4096)
    reused = lost = 0
    for _ in range(10):
        with weights.constructing():
            initialised = Initialised()
        written = {layer.weight.untyped_storage()._cdata for layer in initialised.layers}
        assert all(weights.real_again(layer.weight) is None for layer in initialised.layers)  # written: no recipe
        del initialised
        gc.collect()
        with weights.constructing():
            constants = Constants()
        assert all(weights.is_fake(t) for t in constants.tables)
        reused += sum(t.untyped_storage()._cdata in written for t in constants.tables)
        lost += sum(weights.real_again(t) is None for t in constants.tables)
        del constants
    assert reused > 0  # the condition: storages made at the addresses of written ones
    assert lost == 0


def test_a_write_through_a_view_still_drops_the_recipe() -> None:
    weights = FakeWeights(4096)

    class Viewed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.zeros(64, 64)
            self.table[0].fill_(1.0)  # a view of it, written to
            self.other = torch.zeros(64, 64)

    with weights.constructing():
        module = Viewed()
    assert weights.real_again(module.table) is None
    real = weights.real_again(module.other)
    assert real is not None and not weights.is_fake(real) and bool((real == 0).all())
