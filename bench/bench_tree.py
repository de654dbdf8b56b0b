"""``exportlens check`` on a large tree: scaling with ``--jobs``, and the re-check.

Generates N small model files (default 200) in a temp project, then prints, in one run:

(a) ``check --jobs J --no-cache`` for J = 1 .. the machine's cores: wall time,
    files per second, and the speed-up over J = 1 (the baseline, same run);
(b) ``check`` of the unchanged tree with a warm cache (discovery, hashing, cache
    reads, the report: no torch), against a bare ``python -c pass`` start and
    against the cold check; target: well under a second.

Run: ``.venv/bin/python bench/bench_tree.py`` (a few minutes on two cores);
``--files 40`` scales it down.
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

ROOT = Path(__file__).resolve().parent.parent

MODEL = '''import torch
from torch import nn


class Small{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear({w}, {w})

    def forward(self, x):
        return torch.relu(self.fc(x)) + {i}


model = Small{i}()
example_args = (torch.randn(2, {w}),)
'''


def make_tree(files: int) -> Path:
    work = Path(tempfile.mkdtemp(prefix="bench-tree-"))
    (work / "pyproject.toml").write_text('[project]\nname = "tree"\n')
    for i in range(files):
        folder = work / "models" / f"group{i // 20}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"m{i}.py").write_text(MODEL.format(i=i, w=4 + i % 8))
        if i % 10 == 0:
            (folder / f"util{i}.py").write_text("def helper(x):\n    return x\n")  # not a model: skipped by discovery
    return work


def check(work: Path, *args: str) -> tuple[float, dict]:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "exportlens", "check", "--format", "json", *args, str(work)], capture_output=True, text=True, env=env, cwd=work)
    elapsed = (time.perf_counter() - started) * 1000
    if out.returncode not in (0, 1):
        raise SystemExit(f"check failed ({out.returncode}): {out.stderr[-2000:]}")
    return elapsed, json.loads(out.stdout)


def bare_python_ms(runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append((time.perf_counter() - started) * 1000)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=200, help="model files to generate (default 200)")
    parser.add_argument("--max-jobs", type=int, default=os.cpu_count() or 1, help="largest --jobs (default: the cores)")
    args = parser.parse_args()
    work = make_tree(args.files)
    print(f"{args.files} model files in {work}; {os.cpu_count()} cores")

    cold: dict[int, float] = {}
    for jobs in range(1, args.max_jobs + 1):
        elapsed, report = check(work, "--no-cache", "--jobs", str(jobs))
        files = len(report["files"]) if isinstance(report, dict) and "files" in report else args.files
        cold[jobs] = elapsed
        print(f"(a) check --jobs {jobs} --no-cache: {elapsed / 1000:6.1f} s, {files / (elapsed / 1000):5.1f} files/s, {cold[1] / elapsed:4.2f}x the --jobs 1 baseline (ideal {jobs}x)")

    cache = work / ".bench-cache"
    fill, _ = check(work, "--cache-dir", str(cache))
    warm = sorted(check(work, "--cache-dir", str(cache))[0] for _ in range(3))
    bare = bare_python_ms()
    print(
        f"(b) re-check of the unchanged tree from the cache: median {warm[1]:.0f} ms (runs {', '.join(f'{t:.0f}' for t in warm)});"
        f" a bare python start {bare:.0f} ms; the cold check that filled the cache {fill / 1000:.1f} s ({fill / warm[1]:.0f}x);"
        f" target well under 1000 ms: {'met' if warm[1] < 1000 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
