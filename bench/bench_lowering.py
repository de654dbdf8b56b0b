"""What lowering to ONNX costs in exportlens's job against doing it by hand.

In one warm process, for a small MLP and a 4-layer transformer block stack:
- baseline: ``torch.onnx.export(ep, dynamo=True)`` + ``onnx.checker`` + an onnxruntime
  session and run on the example inputs, called directly on an exported program;
- exportlens: the job's lowering of the same program (``lower_to(Onnx(), ...)``: eager run,
  conversion, checker, session, run, comparison), and the whole job with
  ``lower=("onnx",)`` minus the job without it.
Prints each median and the ratio to the baseline, measured in the same run.

    .venv/bin/python bench/bench_lowering.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any, Callable

MODELS = {
    "mlp": """
        import torch
        from torch.export import Dim
        class MLP(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
            def forward(self, x):
                return self.net(x).softmax(-1)
        model = MLP()
        example_args = (torch.randn(4, 32),)
        dynamic_shapes = ({0: Dim("batch")},)
    """,
    "transformer": """
        import torch
        class Stack(torch.nn.Module):
            def __init__(self):
                super().__init__()
                layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, dropout=0.0)
                self.enc = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
            def forward(self, x):
                return self.enc(x)
        model = Stack().eval()
        example_args = (torch.randn(2, 16, 64),)
    """,
}


def _median_ms(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main(repeats: int = 5) -> None:
    import onnx
    import onnxruntime
    import torch

    from exportlens.core.export.job import default_request, run_job
    from exportlens.core.export.loader import load
    from exportlens.core.export.lowering.destination import Subject, lower_to
    from exportlens.core.export.lowering.onnx import Onnx
    from exportlens.core.export.registry import REGISTRY
    from exportlens.core.export.targets import discover

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    print(f"{'model':<12} {'direct ms':>10} {'lower_onnx ms':>14} {'ratio':>6} {'job+lower - job ms':>19} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, source in MODELS.items():
            path = Path(tmp) / f"{name}.py"
            path.write_text(textwrap.dedent(source))
            REGISTRY.clear()
            loaded = load(str(path), None, tmp)
            [candidate] = discover(loaded.module, loaded.index, strict_default=False, pyproject_entries=[], root=tmp)
            built = candidate.build()
            ep = torch.export.export(built.module, built.args, dynamic_shapes=built.dynamic_shapes).run_decompositions({})

            def direct() -> None:
                program = torch.onnx.export(ep, dynamo=True, verbose=False)
                proto = program.model_proto
                onnx.checker.check_model(proto, full_check=True)
                session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
                session.run(None, {session.get_inputs()[0].name: built.args[0].numpy()})

            def ours() -> None:
                lowering, found = lower_to(Onnx(), Subject(ep, built, candidate, loaded, None))
                assert lowering.status == "ok", (lowering, found)

            plain = default_request(str(path), root=tmp)
            lowered = default_request(str(path), root=tmp, lower=("onnx",))
            direct_ms = _median_ms(direct, repeats)
            ours_ms = _median_ms(ours, repeats)
            job_ms = _median_ms(lambda: run_job(plain, lambda ev: None), repeats)
            job_lower_ms = _median_ms(lambda: run_job(lowered, lambda ev: None), repeats)
            extra = job_lower_ms - job_ms
            print(f"{name:<12} {direct_ms:>10.0f} {ours_ms:>14.0f} {ours_ms / direct_ms:>6.2f} {extra:>19.0f} {extra / direct_ms:>6.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
