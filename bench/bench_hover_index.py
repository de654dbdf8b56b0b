"""Hover index and inlay hint timing: build once, then ``hover()`` at every UTF-16 position of a file.

The in-process cost of the server's hover (no LSP round trip; ``bench_server.py``
measures that), each beside a baseline measured in the same run (``ast.parse`` of
the file; a dict lookup per position). Run: ``.venv/bin/python bench/bench_hover_index.py [model.py]``
(default: ``bench/models/tiny_transformer.py``, ~200 lines, 59 specs).
"""

import ast
import os
import statistics
import sys
import time

from exportlens.core.pipeline import Overrides, Pipeline
from exportlens.server.features.hover.index import HoverIndex
from exportlens.server.markup import MARKDOWN

path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "models", "tiny_transformer.py")
(result,) = Pipeline(Overrides(timeout_s=300, cache=False)).run([path], jobs=1).results
print("targets:", [(t.name, t.status, len(t.signature.inputs) if t.signature else 0) for t in result.targets], [d.code for d in result.diagnostics])
source = open(path, encoding="utf-8").read()
builds = []
for _ in range(20):
    t0 = time.perf_counter()
    index = HoverIndex.build(path, source, result, MARKDOWN)
    builds.append(time.perf_counter() - t0)
# Baselines in the same run: parsing the file once (what any Python language server
# pays per edit), and a dict lookup per position (the floor of any hover table).
parses = []
for _ in range(20):
    t0 = time.perf_counter()
    ast.parse(source)
    parses.append(time.perf_counter() - t0)
lines = source.split("\n")
table = {(ln, ch): ch for ln, text in enumerate(lines) for ch in range(len(text) + 1)}
lookups = []
for key in list(table)[:20000]:
    t0 = time.perf_counter_ns()
    table.get(key)
    lookups.append(time.perf_counter_ns() - t0)
lookups.sort()
times, hits = [], 0
for _ in range(3):
    for ln, text in enumerate(lines):
        for ch in range(len(text.encode("utf-16-le")) // 2 + 1):
            t0 = time.perf_counter_ns()
            h = index.hover(ln, ch)
            times.append(time.perf_counter_ns() - t0)
            hits += h is not None
times.sort()


def q(p: float) -> float:
    return times[min(len(times) - 1, int(p * len(times)))] / 1000


build_ms, parse_ms = statistics.median(builds) * 1000, statistics.median(parses) * 1000
floor_us = lookups[len(lookups) // 2] / 1000
print(f"lines={len(lines)} segments={len(index)} build: median {build_ms:.2f} ms, max {max(builds)*1000:.2f} ms | baseline ast.parse of the file {parse_ms:.2f} ms ({build_ms / parse_ms:.1f}x)")
print(f"hover over {len(times)} positions ({hits} hits): p50 {q(0.5):.2f} us, p99 {q(0.99):.2f} us, max {times[-1]/1000:.1f} us | baseline dict lookup p50 {floor_us:.2f} us ({q(0.5) / floor_us:.1f}x)")

# Inlay hints are built with the hover index, once per result (reading every
# target's program and walking its nodes' stacks): against the same ast.parse baseline.
from exportlens.server.features.hints import HintIndex  # noqa: E402

hint_builds = []
for _ in range(20):
    t0 = time.perf_counter()
    hints = HintIndex.build(path, source, result, MARKDOWN)
    hint_builds.append(time.perf_counter() - t0)
hint_ms = statistics.median(hint_builds) * 1000
nodes = sum(len(t.program) > 0 for t in result.targets)
print(f"inlay hints: {len(hints)} lines from {nodes} programs, build median {hint_ms:.2f} ms, max {max(hint_builds)*1000:.2f} ms | baseline ast.parse {parse_ms:.2f} ms ({hint_ms / parse_ms:.1f}x)")
