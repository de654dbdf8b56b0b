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
