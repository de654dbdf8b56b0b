"""exportlens check vs what a user does today, measured in one run.

(a) ``exportlens check`` over 10 small model files against a fresh ``python``
    per model running ``torch.export.export`` + ``run_decompositions``.
(b) Per-target overhead of exportlens's job (load the file, export, extract the
    signature with source lines, analyse) over torch's own export time, both in a
    warm process, on models of >= 100 graph nodes.

Prints ratios; targets: (a) >= 3x faster, (b) overhead <= 20 %.
Run: .venv/bin/python bench/bench_check.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path

SMALL = '''
import torch
from torch import nn


class Small{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear({w}, {w})
        self.register_buffer("scale", torch.ones({w}))

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.scale + {i}


model = Small{i}()
example_args = (torch.randn(4, {w}),)
'''

LARGE = '''
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        att = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-1)
        x = x + self.proj(att @ v)
        return x + self.mlp(self.norm2(x))


class Tower(nn.Module):
    def __init__(self, depth={depth}, dim=32):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean(1))


model = Tower()
example_args = (torch.randn(2, 16, 32),)
'''

FRESH = '''
import importlib.util, sys, warnings
warnings.filterwarnings("ignore")
import torch
spec = importlib.util.spec_from_file_location("m", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
ep = torch.export.export(m.model, m.example_args).run_decompositions({})
print(ep.graph_signature)
'''


def write_models(folder: Path) -> tuple[list[Path], list[Path]]:
    small = []
    for i in range(10):
        p = folder / "small" / f"small_{i}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(SMALL.format(i=i, w=8 + i)))
        small.append(p)
    large = []
    for depth in (2, 6):
        p = folder / "large" / f"tower_{depth}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(LARGE.format(depth=depth)))
        large.append(p)
    return small, large


def bench_cli(small: list[Path], folder: Path) -> tuple[float, float]:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "exportlens", "check", str(folder / "small"), "--format", "json"], capture_output=True, env=env)
    check_s = time.perf_counter() - started
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    script = folder / "fresh.py"
    script.write_text(FRESH)
    started = time.perf_counter()
    for p in small:
        subprocess.run([sys.executable, str(script), str(p)], check=True, capture_output=True, env=env)
    fresh_s = time.perf_counter() - started
    return check_s, fresh_s


def bench_overhead(large: list[Path], repeats: int = 5) -> list[tuple[str, int, float, float]]:
    import torch

    from exportlens.core.export.job import default_request, run_job

    warnings.filterwarnings("ignore")
    rows = []
    for path in large:
        request = default_request(str(path), root=str(path.parent))
        run_job(request, lambda ev: None)  # warm both paths
        job_ms, torch_ms = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            result = run_job(request, lambda ev: None)
            job_ms.append((time.perf_counter() - started) * 1000)
            assert result.targets and result.targets[0].status == "ok", result.diagnostics

            namespace: dict = {}
            exec(compile(path.read_text(), str(path), "exec"), namespace)
            started = time.perf_counter()
            ep = torch.export.export(namespace["model"], namespace["example_args"]).run_decompositions({})
            torch_ms.append((time.perf_counter() - started) * 1000)
        nodes = len(ep.graph.nodes)
        rows.append((path.stem, nodes, statistics.median(job_ms), statistics.median(torch_ms)))
    return rows


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        small, large = write_models(folder)
        check_s, fresh_s = bench_cli(small, folder)
        print(f"(a) 10 small files: exportlens check {check_s:.2f} s, fresh python per model {fresh_s:.2f} s "
              f"-> {fresh_s / check_s:.1f}x faster (target >= 3x)")
        for name, nodes, job, ref in bench_overhead(large):
            print(f"(b) {name}: {nodes} nodes, exportlens job {job:.0f} ms vs torch export {ref:.0f} ms "
                  f"-> overhead {100 * (job / ref - 1):+.1f} % (target <= 20 %)")


if __name__ == "__main__":
    main()
