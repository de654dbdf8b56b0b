"""What lowering costs in exportlens's job, against doing it by hand and against the export.

ONNX, in one warm process, for a small MLP and a 4-layer transformer block stack:
- baseline: ``torch.onnx.export(ep, dynamo=True)`` + ``onnx.checker`` + an onnxruntime
  session and run on the example inputs, called directly on an exported program;
- exportlens: the job's lowering of the same program (``lower_to(Onnx(), ...)``: eager run,
  conversion, checker, session, run, comparison), and the whole job with
  ``lower=("onnx",)`` minus the job without it.

ExecuTorch, for the same MLP, the 240-node ``bench/models/tiny_transformer.py`` (with
static shapes: XNNPACK takes one dynamic dim per reshape, and the model declares two)
and a tiny transformers Llama (from a small config): torch's export of the model
(``torch.export.export`` + ``run_decompositions({})``) against the job's ExecuTorch
lowering of that program (``lower_to(Executorch(), ...)``: edge dialect, XNNPACK
partition and compile, ``.pte``, load, run, comparison), both measured in this run;
and, in a fresh interpreter, what importing ExecuTorch costs on top of torch (each
job is a fresh fork of a worker that has not imported it).

Memory, for pytorch/examples' super-resolution net (four convolutions and a
``PixelShuffle``, input ``[2, 1, 32, 32]``, declared without ``.eval()``), with static
shapes and with dynamic ones (batch up to 8 and 256 pixels a side; batch up to 32 and
1024 pixels a side, the shapes its users want): the peak resident memory and time of
a fresh interpreter that lowers it by hand (``export``,
``to_edge_transform_and_lower(..., XnnpackPartitioner())``, ``to_executorch()``, the
runtime's load and run) against one that runs exportlens's job on the same file with
``lower=("executorch",)`` (the export, its checks, the lowering, the comparison), and
the memory plan each finds.

Prints each median and the ratio to its baseline.

    .venv/bin/python bench/bench_lowering.py [--only onnx|executorch|memory]
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


def main_onnx(repeats: int = 5) -> None:
    import onnx
    import onnxruntime
    import torch

    from exportlens.core.export.job import default_request, run_job
    from exportlens.core.export.loader import load
    from exportlens.core.export.lowering.destination import Subject, lower_to
    from exportlens.core.export.lowering.onnx import Onnx
    from exportlens.core.export.registry import REGISTRY
    from exportlens.core.export.targets import discover
    from exportlens.core.source.project import UserSources

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    print(f"{'model':<12} {'direct ms':>10} {'lower_to ms':>14} {'ratio':>6} {'job+lower - job ms':>19} {'ratio':>6}")
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
                lowering, found = lower_to(Onnx(), Subject(ep, built, candidate, loaded, UserSources(loaded.index, loaded.root), None))
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


def _tiny_transformer() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("tiny_transformer", Path(__file__).parent / "models" / "tiny_transformer.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.model, module.example_args, module.example_kwargs


def _tiny_llama() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval(), (torch.randint(0, 128, (1, 8)),), {"use_cache": False}


def _mlp() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    return model, (torch.randn(4, 32),), {}


def _import_ms() -> tuple[float, float]:
    """Importing torch, then ExecuTorch's lowering and runtime, in a fresh interpreter."""
    import subprocess

    code = (
        "import time; t = time.perf_counter(); import torch; u = time.perf_counter()\n"
        "from executorch.exir import to_edge_transform_and_lower\n"
        "from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner\n"
        "from executorch.runtime import Runtime; Runtime.get(); v = time.perf_counter()\n"
        "print((u - t) * 1000, (v - u) * 1000)"
    )
    runs = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
        runs.append((float(out[0]), float(out[1])))
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def main_executorch(repeats: int = 3) -> None:
    import torch

    from exportlens.core.export.extract import extract_signature
    from exportlens.core.export.loader import load
    from exportlens.core.export.lowering.destination import Subject, lower_to
    from exportlens.core.export.lowering.executorch import Executorch
    from exportlens.core.export.targets import Built, Candidate
    from exportlens.core.model.results import TargetDecl
    from exportlens.core.model.signature import SourceLine
    from exportlens.core.source.project import UserSources

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    torch_ms, executorch_ms = _import_ms()
    print(f"import: torch {torch_ms:.0f} ms, then ExecuTorch (exir, XNNPACK, runtime) {executorch_ms:.0f} ms ({executorch_ms / torch_ms:.2f}x torch's)")
    print(f"{'model':<18} {'nodes':>6} {'export ms':>10} {'executorch ms':>14} {'ratio':>6}  coverage, .pte, planned memory")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench_model.py"
        path.write_text("x = 1\n")
        loaded = load(str(path), None, tmp)
        sources = UserSources(loaded.index, loaded.root)
        for name, make in (("mlp", _mlp), ("tiny_transformer", _tiny_transformer), ("tiny_llama", _tiny_llama)):
            module, args, kwargs = make()
            built = Built(module, args, kwargs, None, False)
            candidate = Candidate(TargetDecl(name, 1, "globals"), SourceLine(1, 1), lambda: built)
            # A mutating forward (tiny_transformer counts calls) moves its buffers on
            # each run: every export starts from the same state.
            state = {k: v.clone() for k, v in module.state_dict().items()}

            def export() -> Any:
                module.load_state_dict(state)
                return torch.export.export(module, args, kwargs).run_decompositions({})

            ep = export()
            nodes = sum(n.op == "call_function" for n in ep.graph.nodes)
            signature = extract_signature(ep, module, index=loaded.index, args=args, kwargs=kwargs, sources=sources)
            subject = Subject(ep, built, candidate, loaded, sources, signature)
            last: list[Any] = []

            def lower() -> None:
                lowering, found = lower_to(Executorch(), subject)
                assert lowering.status == "ok", (lowering, found)
                last[:] = [lowering]

            export_ms = _median_ms(export, repeats)
            lower_ms = _median_ms(lower, repeats)
            low = last[0]
            facts = f"{low.coverage()}, {low.sizes()}"
            print(f"{name:<18} {nodes:>6} {export_ms:>10.0f} {lower_ms:>14.0f} {lower_ms / export_ms:>6.1f}  {facts}")
    sys.stdout.flush()


SUPER_RESOLUTION = """
import torch
import torch.nn as nn
import torch.nn.init as init


class Net(nn.Module):
    def __init__(self, upscale_factor=3):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(32, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))


model = Net()
example_args = (torch.randn(2, 1, 32, 32),)
"""

# The dynamic shapes its users want (any batch up to 32, 8 to 1024 pixels a side), and
# a smaller range whose program fits the job's memory cap.
DYNAMIC = """
from torch.export import Dim
dynamic_shapes = ({0: Dim("batch", max=%d), 2: Dim("height", min=8, max=%d), 3: Dim("width", min=8, max=%d)},)
"""

_PLAIN_EXECUTORCH = """
import resource, runpy, sys, time, warnings
warnings.filterwarnings("ignore")
started = time.perf_counter()
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime
spec = runpy.run_path(sys.argv[1])
ep = torch.export.export(spec["model"], spec["example_args"], dynamic_shapes=spec.get("dynamic_shapes"))
program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
plan = sum(program.executorch_program.execution_plan[0].non_const_buffer_sizes)
method = Runtime.get().load_program(bytes(program.buffer)).load_method("forward")
method.execute(list(spec["example_args"]))
print(plan, time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""

_EXPORTLENS_JOB = """
import resource, sys, time, warnings
warnings.filterwarnings("ignore")
started = time.perf_counter()
from exportlens.core.export.job import default_request, run_job
result = run_job(default_request(sys.argv[1], root=sys.argv[2], lower=("executorch",)), lambda event: None)
[target] = result.targets
[lowering] = target.lowerings
assert target.status == "ok" and lowering.status in ("ok", "mismatch", "not-run"), lowering
print(lowering.planned_memory_bytes, lowering.needed_bytes, lowering.run_peak_bytes or 0, lowering.status,
      time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def main_memory(repeats: int = 3) -> None:
    """Peak resident memory (MB) and time of lowering the super-resolution net to
    ExecuTorch: by hand (export, lower, build, load, run) against exportlens's job
    (the export, its checks, the lowering, the comparison), with static shapes and
    with two ranges of dynamic ones. With the widest, ExecuTorch's own run peaks at
    ~9 GB; exportlens says so from the plan and its estimate and does not run it
    (its job's cap is 8192 MB). Printed: ExecuTorch's plan and exportlens's (equal),
    exportlens's estimate of what the run needs and the run's measured peak over the
    job's resident memory (when run), each process's peak, time, and the ratios."""
    import subprocess

    rows = [("static 2x1x32x32", ""), ("dynamic <=8x256^2", DYNAMIC % (8, 256, 256)), ("dynamic <=32x1024^2", DYNAMIC % (32, 1024, 1024))]
    print(f"{'model':<22} {'ET plan MB':>10} {'our plan MB':>11} {'needs MB':>9} {'run MB':>7} {'status':>8} {'ET peak MB':>10} {'our peak MB':>11} {'ratio':>6} {'ET s':>6} {'our s':>6} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, shapes in rows:
            path = Path(tmp) / "super_resolution.py"
            path.write_text(SUPER_RESOLUTION + shapes)
            # ExecuTorch's own run of the widest range takes ~9 GB and half a minute: once.
            times = 1 if "1024" in name else repeats

            def runs(code: str, *args: str) -> list[list[str]]:
                return [subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True).stdout.split()[-6:] for _ in range(times)]

            plain = runs(_PLAIN_EXECUTORCH, str(path))
            ours = runs(_EXPORTLENS_JOB, str(path), tmp)
            et_plan = int(plain[0][-3])
            et_s, et_mb = statistics.median(float(r[-2]) for r in plain), statistics.median(float(r[-1]) for r in plain)
            our_plan, needs, ran, status = int(ours[0][0]), int(ours[0][1]), int(ours[0][2]), ours[0][3]
            our_s, our_mb = statistics.median(float(r[4]) for r in ours), statistics.median(float(r[5]) for r in ours)
            mb = 1 << 20
            print(
                f"{name:<22} {et_plan / mb:>10.1f} {our_plan / mb:>11.1f} {needs / mb:>9.0f} {ran / mb:>7.0f} {status:>8} "
                f"{et_mb:>10.0f} {our_mb:>11.0f} {our_mb / et_mb:>6.2f} {et_s:>6.1f} {our_s:>6.1f} {our_s / et_s:>6.2f}"
            )
            sys.stdout.flush()


if __name__ == "__main__":
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    if only in (None, "onnx"):
        main_onnx()
    if only in (None, "executorch"):
        main_executorch()
    if only in (None, "memory"):
        main_memory()
