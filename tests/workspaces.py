"""Model projects that the end-to-end tests of the command and of the server both
build: one definition each, so the two front ends are tested on the same code."""

from __future__ import annotations

import textwrap
from pathlib import Path

# A workspace whose files are named like libraries exportlens imports, next to a model
# that imports its own local helper.
SHADOWS = ("attr", "tokenize", "msgpack", "typing_extensions")
HOSTILE_MODEL = """\
import torch
from torch import nn

from helpers import SCALE  # a local module: imported as Python would import it


class Scaled(nn.Module):
    def forward(self, x):
        return x * SCALE


model = Scaled()
example_args = (torch.randn(2, 3),)
"""


def hostile_workspace(folder: Path) -> Path:
    for name in SHADOWS:
        (folder / f"{name}.py").write_text(f"raise RuntimeError('the workspace {name}.py was imported')\n")
    (folder / "helpers.py").write_text("SCALE = 3\n")
    (folder / "model.py").write_text(HOSTILE_MODEL)
    return folder / "model.py"


# A model with a declared dynamic dim, for the signature snapshot and its checks.
CONTRACT_MODEL = textwrap.dedent(
    '''\
    import torch
    from torch import nn
    from torch.export import Dim


    class TinyMLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.fc2 = nn.Linear(16, 4)

        def forward(self, x):
            h = self.fc1(x).relu()
            return self.fc2(h)


    model = TinyMLP()
    example_args = (torch.randn(2, 8),)
    dynamic_shapes = {"x": {0: Dim("batch", min=1, max=32)}}
    '''
)


# A model whose classes live in their own module (issue 12's layout): the declaring
# file holds only a Dim, the `model = Net()` line and the example inputs. Block has
# no parameter of its own: only torch's module records place its instances.
SPLIT_LAYERS = textwrap.dedent(
    '''\
    import torch
    from torch import nn


    class Attn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q = nn.Linear(8, 8)
            self.register_buffer("scale", torch.ones(8), persistent=False)

        def forward(self, x):
            return self.q(x) * self.scale


    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = Attn()

        def forward(self, x):
            return x + self.attn(x)


    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = Block()
            self.second = Block()

        def forward(self, x):
            return self.second(self.first(x))
    '''
)
SPLIT_MODEL = textwrap.dedent(
    '''\
    import torch
    from torch.export import Dim

    from pkg.layers import Net

    batch = Dim("batch", min=2, max=64)
    model = Net()
    example_args = (torch.randn(4, 8),)
    dynamic_shapes = {"x": {0: batch}}
    '''
)


def split_workspace(folder: Path) -> Path:
    """``model.py`` declaring the target, ``pkg/layers.py`` holding its classes; the
    project's root is marked by its pyproject.toml, as a real project's is."""
    (folder / "pyproject.toml").write_text('[project]\nname = "split"\nversion = "0.0.0"\n')
    (folder / "pkg").mkdir()
    (folder / "pkg" / "__init__.py").write_text("")
    (folder / "pkg" / "layers.py").write_text(SPLIT_LAYERS)
    (folder / "model.py").write_text(SPLIT_MODEL)
    return folder / "model.py"


# The package-layout project a new user writes (issue 22): the block in
# `mymodels/blocks.py`, the model in `mymodels/net.py`, its target in pyproject.toml.
# The block's data-dependent branch is at blocks.py:20, a line net.py also has.
MYMODELS_PYPROJECT = textwrap.dedent(
    """\
    [project]
    name = "mymodels"
    version = "0.0.0"

    [tool.exportlens]
    targets = ["mymodels/net.py:make_net"]
    """
)
MYMODELS_BLOCKS = textwrap.dedent(
    '''\
    """Blocks."""

    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            y = self.fc(x)
            # Padding, so that the branch's line (20) is a line net.py has too:
            # a diagnostic shown in the wrong file would land on an unrelated line.
            #
            #
            #
            #
            if x.sum() > 0:
                return y
            return -y
    '''
)
MYMODELS_NET = textwrap.dedent(
    '''\
    """The model."""

    import torch
    from torch import nn

    from mymodels.blocks import Block


    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = Block()

        def forward(self, x):
            return self.block(x)


    def make_net():
        return Net(), (torch.randn(2, 8),)
    '''
)


def mymodels_workspace(folder: Path, *, blocks: str = MYMODELS_BLOCKS, net: str = MYMODELS_NET, pyproject: str = MYMODELS_PYPROJECT) -> Path:
    """The package-layout project in ``folder``; returns ``mymodels/net.py``."""
    (folder / "pyproject.toml").write_text(pyproject)
    package = folder / "mymodels"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "blocks.py").write_text(blocks)
    (package / "net.py").write_text(net)
    return package / "net.py"
