"""What keying a result by its libraries costs: a tiny transformers BERT (no
downloads), checked once by the real ``exportlens check`` into a fresh cache, then:

(1) the manifest's library units: how many, and how many are distributions (one RECORD
    hash each) and how many single module files;
(2) the library part of a lookup, ``second_key`` over the manifest's libraries, in a
    fresh process (the first lookup of a ``check`` run: nothing memoized) and repeated
    in one process (a server's later lookups), median of 200;
(3) the whole ``exportlens check`` of the file again, served from the cache, best of 3;
(4) the export's own time (``--no-cache``), best of 3, for the job's side: finding
    the units and hashing them happens at the end of every job.

Run: ``.venv/bin/python bench/bench_library_keys.py``. On a loaded 2-core machine
(issue 29, point 3), before -> after keying by content: 1 unit (transformers' top-level
file, by its stat) -> 23 distributions (transformers and what it imports); the library
part of a lookup 0.03 -> 2.4 ms in a fresh process, 0.005 -> 0.07 ms repeated; a
cached check 0.17 -> 0.17 s; ``--no-cache`` 4.88 -> 4.87 s.
"""

from __future__ import annotations

import glob
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

MODEL = textwrap.dedent(
    """
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37, max_position_embeddings=64)
    model = BertModel(config).eval()
    example_args = (torch.zeros(2, 8, dtype=torch.long),)
    """
)

LOOKUP = """
import glob, statistics, sys, time
from exportlens.core.cache.entry_file import KIND_MANIFEST, decode_file
from exportlens.core.cache.keys import second_key

[manifest] = [decode_file(KIND_MANIFEST, open(p, "rb").read()) for p in glob.glob(sys.argv[1] + "/??/*.manifest")]
libs = manifest["libs"]
start = time.perf_counter()
second_key(manifest["key"], [], libraries=libs)
first = time.perf_counter() - start
times = []
for _ in range(200):
    start = time.perf_counter()
    second_key(manifest["key"], [], libraries=libs)
    times.append(time.perf_counter() - start)
dists = sum(p.endswith("RECORD") for p in libs)
print(f"{len(libs)} {dists} {first * 1000:.2f} {statistics.median(times) * 1000:.3f}")
"""


def _check(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "exportlens", "check", "--format", "json", *args], capture_output=True, check=False, timeout=600)
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "proj"
        project.mkdir()
        (project / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 300\n")
        model = project / "bert.py"
        model.write_text(MODEL)
        cache = Path(tmp) / "cache"
        _check("--cache-dir", str(cache), str(model))
        if not glob.glob(str(cache / "??" / "*.manifest")):
            raise SystemExit("the check stored nothing")
        out = subprocess.run([sys.executable, "-c", LOOKUP, str(cache)], capture_output=True, text=True, check=True).stdout.split()
        units, dists, cold_ms, warm_ms = int(out[0]), int(out[1]), float(out[2]), float(out[3])
        hit = min(_check("--cache-dir", str(cache), str(model)) for _ in range(3))
        export = min(_check("--no-cache", str(model)) for _ in range(3))
        print(f"library units in the key     {units} ({dists} distributions, {units - dists} module files)")
        print(f"library part of a lookup     {cold_ms:.2f} ms in a fresh process, {warm_ms:.3f} ms repeated (median of 200)")
        print(f"check served from the cache  {hit:.2f} s (best of 3)")
        print(f"check --no-cache             {export:.2f} s (best of 3)")


if __name__ == "__main__":
    main()
