"""``check --shard K/N`` on a corpus of uneven model files, measured in one run (issue 30).

The corpus: transformer stacks of 1 to 16 blocks (export times from a fraction of a
second to several seconds). Measured, each with one job and no cache (every file exported):

(a) the single run, which also writes the durations file (``--store-durations``);
(b) three shards one after the other, each as its own process (its own worker start,
    as on its own runner), balanced by that file: the slowest shard against (a);
(c) the same three shards without durations (every file counts the same);
(d) ``exportlens merge`` of (b)'s reports.

Target: the slowest shard of (b) <= 0.4x the single run.
Run: .venv/bin/python bench/bench_shard.py [--blocks 1,1,2,2,3,4,6,8,12,16]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODEL = '''
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


class Stack{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(64) for _ in range({blocks})])

    def forward(self, x):
        return self.blocks(x)


model = Stack{i}()
example_args = (torch.randn(2, 16, 64),)
'''


def check(project: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "exportlens", *args], cwd=project, capture_output=True, text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        sys.exit(f"exportlens {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return elapsed, proc


def shards(project: Path, count: int, *extra: str) -> list[float]:
    times = []
    for k in range(1, count + 1):
        elapsed, proc = check(project, "check", "--shard", f"{k}/{count}", "--jobs", "1", "--no-cache", "--format", "json", *extra)
        (project / f"shard-{k}.json").write_text(proc.stdout)
        files = json.loads(proc.stdout)["shard"]["files"]
        print(f"  shard {k}/{count}: {elapsed:6.1f} s  {', '.join(f.removeprefix('models/') for f in files)}")
        times.append(elapsed)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", default="1,1,2,2,3,4,6,8,12,16", help="blocks of each model file, comma-separated")
    args = parser.parse_args()
    blocks = [int(b) for b in args.blocks.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "pyproject.toml").write_text("")
        (project / "models").mkdir()
        for i, n in enumerate(blocks):
            (project / "models" / f"stack_{i:02}_{n}blocks.py").write_text(MODEL.format(i=i, blocks=n))
        print(f"{len(blocks)} model files of {args.blocks} blocks; one job, no cache")
        single, proc = check(project, "check", "--jobs", "1", "--no-cache", "--no-signatures", "--store-durations", "durations.json")
        durations = json.loads((project / "durations.json").read_text())
        print(f"(a) single run: {single:.1f} s; the files' recorded times (durations.json) sum to {sum(durations.values()):.1f} s")
        print("(b) three shards balanced by durations.json:")
        balanced = shards(project, 3, "--durations", "durations.json")
        started = time.perf_counter()
        merged = subprocess.run([sys.executable, "-m", "exportlens", "merge", "--format", "sarif", "shard-1.json", "shard-2.json", "shard-3.json"], cwd=project, capture_output=True, text=True)
        merge_s = time.perf_counter() - started
        assert merged.returncode in (0, 1), merged.stderr
        print("(c) three shards without durations:")
        even = shards(project, 3)
        print(f"(d) merge of (b): {merge_s:.2f} s")
        print(f"slowest shard / single run: {max(balanced) / single:.2f} balanced by durations (target <= 0.40), {max(even) / single:.2f} without")


if __name__ == "__main__":
    main()
