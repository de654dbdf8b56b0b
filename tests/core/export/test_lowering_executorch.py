"""ExecuTorch lowering of a model built without weight values (``Built.weights == "fake"``):
the edge program, the XNNPACK partition and the memory plan need no values, so delegation coverage and the plan are
reported the same as with real weights; the .pte, its run and the comparison are
skipped and say so, saving included. Weights here hold no values at all (the meta
device): anything that read one would fail."""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("executorch", reason="the exportlens[executorch] extra is not installed")

import torch  # noqa: E402

from exportlens.core.export.extract import extract_signature  # noqa: E402
from exportlens.core.export.loader import Loaded, load  # noqa: E402
from exportlens.core.export.lowering.destination import Subject, lower_to  # noqa: E402
from exportlens.core.export.lowering.executorch import Executorch  # noqa: E402
from exportlens.core.export.targets import Built, Candidate  # noqa: E402
from exportlens.core.model.lowering import Lowering  # noqa: E402
from exportlens.core.model.results import Diagnostic, TargetDecl  # noqa: E402
from exportlens.core.model.signature import SourceLine  # noqa: E402
from exportlens.core.source.project import UserSources  # noqa: E402

MODEL = """
    import torch


    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x):
            h = torch.relu(self.proj(x))
            return torch.cumsum(h, dim=-1)
"""


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    folder = tmp_path_factory.mktemp("fake")
    (folder / "model.py").write_text(textwrap.dedent(MODEL))
    return load(str(folder / "model.py"), None, str(folder))


def _lower(loaded: Loaded, device: str, weights: str, keep: bool = False) -> tuple[Lowering, list[Diagnostic]]:
    with torch.device(device):
        module = loaded.module.Net()  # type: ignore[union-attr]
        args = (torch.randn(3, 8),)
    built = Built(module, args, None, None, False)
    object.__setattr__(built, "weights", weights)  # Built.weights, however Built declares it
    candidate = Candidate(TargetDecl("Net", 4, "globals"), SourceLine(4, 1), lambda: built)
    sources = UserSources(loaded.index, loaded.root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(module, args).run_decompositions({})
    signature = extract_signature(ep, module, index=loaded.index, args=args, kwargs=None, sources=sources)
    return lower_to(Executorch(), Subject(ep, built, candidate, loaded, sources, signature, keep=keep))


def _line(loaded: Loaded, text: str) -> int:
    return next(i for i, line in enumerate(Path(loaded.path).read_text().splitlines(), 1) if text in line)


def test_fake_weights_give_the_coverage_of_real_ones_and_skip_the_run(loaded: Loaded) -> None:
    real, real_found = _lower(loaded, "cpu", "real")
    fake, fake_found = _lower(loaded, "meta", "fake")
    assert real.status == "ok" and fake.status == "not-run"
    coverage = [(low.delegated_ops, low.total_ops, low.fallback_lines, low.fallback_ops) for low in (real, fake)]
    assert coverage[0] == coverage[1] == (2, 3, 1, ("aten::cumsum",))
    assert [(d.code, d.line) for d in fake_found] == [(d.code, d.line) for d in real_found] == [("lowering/executorch-not-delegated", _line(loaded, "torch.cumsum"))]
    assert fake.pte_bytes is None and fake.outputs == () and fake.model == b""
    # The memory plan needs no values either: ExecuTorch's planner, run on the partition
    # whose delegate was not compiled, within a few bytes of the real one.
    assert real.planned_memory_bytes is not None and fake.planned_memory_bytes is not None
    assert abs(fake.planned_memory_bytes - real.planned_memory_bytes) <= real.planned_memory_bytes // 100 + 64, (fake.planned_memory_bytes, real.planned_memory_bytes)
    assert fake.skipped == "built with fake weights: the edge program, its XNNPACK partition and its memory plan need no values, but the .pte was not built, run or compared with eager"
    assert fake.describe().startswith("lowered to ExecuTorch's edge dialect (XNNPACK runs 2 of 3 ops; 1 line falls back, ")


def test_saving_a_fake_weights_program_says_it_needs_real_weights(loaded: Loaded) -> None:
    """Reached only where the weights policy found real weights too large (else the
    worker ran the target again with real ones: see tests/e2e/test_lowering_executorch.py)."""
    fake, _ = _lower(loaded, "meta", "fake", keep=True)
    assert fake.status == "not-run" and fake.model == b""
    assert fake.skipped.endswith("; it was not saved: that needs real weights, which would not fit the memory cap (memory_mb)")
    real, _ = _lower(loaded, "cpu", "real", keep=True)
    assert real.status == "ok" and len(real.model) == real.pte_bytes


def test_xnnpack_itself_reads_the_weights(loaded: Loaded) -> None:
    """Why the fake path partitions without compiling: XNNPACK's own lowering reads
    every weight, which a model without values fails."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    with torch.device("meta"):
        module: Any = loaded.module.Net()  # type: ignore[union-attr]
        args = (torch.randn(3, 8),)
    ep = torch.export.export(module, args).run_decompositions({})
    with pytest.raises(Exception):  # noqa: B017 - whatever XNNPACK raises on a weight without data
        to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
