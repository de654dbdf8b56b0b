"""What the portable supervision costs a save, against Linux's, in the same run.

With ``EXPORTLENS_SUPERVISION=portable`` (what macOS and Windows have) the worker and
the pool poll non-blocking reads with a pause of up to 20 ms instead of ``select``
(``core/isolation/waiting.py``), and without ``/proc`` the worker kills and reaps each
job before its result and its standbys warm without hot pages. This exports one small
model N times through a real one-worker pool (fork) in each mode -- a request to a
result, the time a save waits -- and prints the medians and their ratio. Each mode
runs in its own process (the mode is read once, at import).

Run: ``.venv/bin/python bench/bench_waiting.py [N]`` (default 15)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

ONE_MODE = r"""
import json, sys, time
from pathlib import Path
from exportlens.core.isolation.pool import WorkerPool
from exportlens.core.isolation.startmethod import StartMethod
from exportlens.core.model.request import ExportRequest, Limits

path, n = Path(sys.argv[1]), int(sys.argv[2])
times = []
with WorkerPool(1, start_method=StartMethod("fork", "the bench")) as pool:
    pool.wait_ready()
    for i in range(n + 2):
        path.write_text(path.read_text().rsplit("\n_save", 1)[0] + f"\n_save = {i}\n")
        started = time.perf_counter()
        (result,) = pool.run([ExportRequest(id=i, path=str(path), root=str(path.parent), limits=Limits(600))])
        assert [t.status for t in result.targets] == ["ok"], result
        if i >= 2:  # the first two warm the worker and its standby
            times.append(time.perf_counter() - started)
print(json.dumps(times))
"""

MODEL = """import torch


class Add(torch.nn.Module):
    def forward(self, x):
        return x + 1


model = Add()
example_args = (torch.randn(2),)
_save = 0
"""


def run(mode: str, path: str, n: int) -> list[float]:
    env = {**os.environ, "EXPORTLENS_SUPERVISION": mode}
    done = subprocess.run([sys.executable, "-c", ONE_MODE, path, str(n)], env=env, capture_output=True, text=True, timeout=1200, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.py")
        with open(path, "w") as f:
            f.write(MODEL)
        select = run("auto", path, n)
        polling = run("portable", path, n)
    a, b = statistics.median(select), statistics.median(polling)
    print(f"save -> result, median of {n} (fork, one worker):")
    print(f"  Linux (select, /proc):        {a * 1000:7.1f} ms")
    print(f"  portable (polling, no /proc): {b * 1000:7.1f} ms   ({b / a:.2f}x)")


if __name__ == "__main__":
    main()
