"""The model file the worker tests export, and the request for it.

The smallest model worth a job: one target that adds one, exported in a moment,
after whatever the test has the file do first (its ``prelude``, which imports
torch); what a test observes is the worker around it, not the export."""

from __future__ import annotations

from pathlib import Path

from exportlens.core.model.request import ExportRequest, Limits

ADD = '''

class Add(torch.nn.Module):
    def forward(self, x):
        return x + 1


model = Add()
example_args = (torch.randn(2),)
'''


def add_model(prelude: str = "import torch") -> str:
    """The text of a model file: ``prelude``, then the ``Add`` target."""
    return "\n" + prelude + "\n" + ADD


def request_for(path: Path, id: int = 1, limits: Limits | None = None) -> ExportRequest:
    """The request to export ``path``, its folder the project root; a roomy time
    limit (600 s) unless ``limits`` says otherwise."""
    return ExportRequest(id=id, path=str(path), root=str(path.parent), limits=limits or Limits(600))
