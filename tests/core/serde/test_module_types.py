"""``module_types``: which class each submodule path of a real program is, read off
the nodes' ``nn_module_stack`` without torch (the hover on a submodule's ``class``
line builds on it); bytes that are not a program are a ``SchemaError``."""

from __future__ import annotations

import msgpack
import pytest
import torch

from exportlens import program as P
from exportlens.core.serde import schema as S
from exportlens.core.serde.codec import SchemaError
from exportlens.core.serde.modules import module_types


class Inner(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


class Outer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = Inner()
        self.blocks = torch.nn.ModuleList([Inner(), Inner()])
        self.unused = Inner()  # never called: no node names it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.a(x)
        for b in self.blocks:
            x = b(x)
        return x + self.unused.lin.weight.sum()


@pytest.mark.parametrize("strict", [False, True])
def test_every_called_submodule_path_with_its_class(strict: bool) -> None:
    ep = torch.export.export(Outer(), (torch.ones(2, 3),), strict=strict)
    found = module_types(P.dumps(ep))
    here = __name__
    assert found[""] == f"{here}.Outer"
    assert {p: found[p] for p in ("a", "blocks.0", "blocks.1")} == dict.fromkeys(("a", "blocks.0", "blocks.1"), f"{here}.Inner")
    assert found["blocks.1.lin"] == "torch.nn.modules.linear.Linear"
    assert "unused" not in found


def test_bytes_that_are_not_a_program_are_a_schema_error() -> None:
    with pytest.raises(SchemaError):
        module_types(b"\x93not a program")
    ep = torch.export.export(Inner(), (torch.ones(2, 3),))
    doc = msgpack.unpackb(P.dumps(ep), strict_map_key=False)
    doc[S.P_GRAPH] = [[[0, 0, None, [], [], None, [None, [[0, "x", 0]]]]], []]  # a path that is not a string id
    with pytest.raises(SchemaError):
        module_types(msgpack.packb(doc))
