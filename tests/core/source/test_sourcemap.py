"""The AST index behind every line exportlens reports."""

from __future__ import annotations

from exportlens.core.source.sourcemap import SourceIndex, param_for_placeholder

SRC = '''import torch
from torch.export import Dim, dims
batch = Dim("batch", min=2)
h, w = dims("h", "w")


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)
        self.register_buffer("steps", torch.zeros(1))
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self, x, mask=None, *rest, scale: float = 1.0, **extra):
        self.steps.add_(1)
        self.cache = x * 2
        if mask is None:
            return self.fc(x)
        return self.fc(x) * mask


model = Block()
'''


def test_classes_attributes_and_methods() -> None:
    index = SourceIndex.build(SRC, "/m.py")
    block = index.classes["Block"]
    assert block.where.line == 7
    assert {k: v.line for k, v in block.attributes.items()} == {"fc": 10, "steps": 11, "w": 12, "cache": 16}
    forward = block.methods["forward"]
    assert list(forward.params) == ["self", "x", "mask", "rest", "scale", "extra"]
    assert forward.params["x"].line == 14 and forward.params["x"].column == 23
    assert [r.line for r in forward.returns] == [18, 19]
    assert block.late_assignments["cache"][0].line == 16
    assert index.enclosing_function(17) is forward


def test_globals_dims_and_inplace_calls() -> None:
    index = SourceIndex.build(SRC, "/m.py")
    assert index.global_assignments["model"].line == 22
    assert index.dim_declaration("batch") is not None and index.dim_declaration("batch").line == 3
    assert index.dim_declaration("h").line == 4
    call = index.inplace_call_at(15, "add_")
    assert call is not None and (call.line, call.column) == (15, 9)


def test_broken_source_gives_an_empty_index() -> None:
    index = SourceIndex.build("def broken(:\n", "/m.py")
    assert index.classes == {} and index.line_text(1) == "def broken(:"


def test_placeholder_names_lead_to_their_parameter() -> None:
    params = ["x", "x_mask", "opts", "pair"]
    assert param_for_placeholder("x", params) == "x"
    assert param_for_placeholder("x_0_1", params) == "x"
    assert param_for_placeholder("x_mask_0", params) == "x_mask"  # the longest prefix wins
    assert param_for_placeholder("opts_k", params) == "opts"
    assert param_for_placeholder("xs", params) is None and param_for_placeholder("y", []) is None


def test_sourcemap_facts_hover_relies_on() -> None:
    source = (
        "def make():\n"
        "    class Local(torch.nn.Module):\n"
        "        def __init__(self):\n"
        "            self.register_buffer('b', None)\n"
        "        def forward(me, x, y):\n"
        "            me.b.add_(x)\n"
        "            x += 1\n"
        "            z = [x for x in y]\n"
        "            for y in z:\n"
        "                pass\n"
        "            return x\n"
        "    return Local()\n"
    )
    index = SourceIndex.build(source)
    local = index.classes["make.Local"]
    assert (local.first_line, local.last_line) == (2, 11)
    assert [s.line for s in local.self_uses["b"]] == [6]
    assert [(s.line, s.column) for s in local.registered_names["b"]] == [(4, 34)]
    assert local.attributes["b"].line == 4  # a class inside a factory still finds its methods
    forward = local.methods["forward"]
    assert [s.line for s in forward.name_uses["x"]] == [6, 7, 8, 11]  # `x += 1` reads x; the comprehension's x too
    assert "x" not in forward.rebound_at  # neither `x += 1` nor the comprehension rebinds it
    assert forward.rebound_at["y"] == (9, 18)  # just past the `y` of `for y in z`
