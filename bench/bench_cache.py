"""exportlens check over unchanged files: the result cache vs exporting again.

10 small model files (the bundled examples' shapes, varied) in a temporary folder,
checked by the real command in a subprocess with a fresh temporary cache:
(1) the first run (cache empty: exports, stores), (2) the same run again (every file
a hit; best of 3), and for reference (3) the same run with ``--no-cache``.

Prints the times and the ratio uncached / cached; target >= 20x.
Run: .venv/bin/python bench/bench_cache.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

MLP = '''
import torch
from torch import nn


class MLP{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear({w}, {h})
        self.act = nn.ReLU()
        self.fc2 = nn.Linear({h}, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


model = MLP{i}()
example_args = (torch.randn(2, {w}),)
'''

COUNTER = '''
import torch
from torch import nn


class Counter{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros(1))
        self.register_buffer("scratch", torch.zeros({w}), persistent=False)

    def forward(self, x):
        self.steps.add_({i} + 1)
        return x * {i} + self.steps
'''


def write_models(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(10):
        if i % 2:
            text = COUNTER.format(i=i, w=3 + i) + f"\n\nmodel = Counter{i}()\nexample_args = (torch.randn({3 + i}),)\n"
        else:
            text = MLP.format(i=i, w=8 + i, h=16 + i)
        (folder / f"model_{i}.py").write_text(textwrap.dedent(text))


def run_check(folder: Path, cache: Path, *extra: str) -> tuple[float, dict]:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    command = [sys.executable, "-m", "exportlens", "check", "--format", "json", "--cache-dir", str(cache), *extra, str(folder)]
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, env=env)
    seconds = time.perf_counter() - started
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return seconds, json.loads(proc.stdout)


def _without_times(doc: dict) -> dict:
    # A hit keeps the original export_ms; only a miss (exportlens's own code edited
    # between runs changes the key) would differ there.
    return {**doc, "files": [{**f, "targets": [{**t, "export_ms": None} for t in f["targets"]]} for f in doc["files"]]}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder, cache = Path(tmp) / "models", Path(tmp) / "cache"
        write_models(folder)
        uncached_s, first = run_check(folder, cache)
        cached = []
        for _ in range(3):
            seconds, doc = run_check(folder, cache)
            assert _without_times(doc) == _without_times(first), "a cached run reported something else"
            cached.append(seconds)
        no_cache_s, _ = run_check(folder, cache, "--no-cache")
        targets = sum(len(f["targets"]) for f in first["files"])
        best = min(cached)
        print(f"10 files ({targets} targets): first run {uncached_s:.2f} s, cached run {best:.3f} s "
              f"(best of 3: {', '.join(f'{s:.3f}' for s in cached)}) -> {uncached_s / best:.1f}x faster (target >= 20x)")
        print(f"reference: the same run with --no-cache {no_cache_s:.2f} s -> {no_cache_s / best:.1f}x the cached run")


if __name__ == "__main__":
    main()
