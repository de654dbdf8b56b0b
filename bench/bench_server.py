"""Benchmark ``exportlens serve`` through a real LSP client over stdio.

Prints, in one run, each number next to the baseline measured in the same run:

(a) save-to-diagnostics latency (edit + save -> publishDiagnostics of that version)
    for a small model and a >=100-node model, saves 1.5 s apart and back to back,
    against torch's own warm export time for the same model (``export`` +
    ``run_decompositions`` in a warm process, measured between our saves, so under
    the same load; target 1.1x + 30 ms) and a fresh ``python`` doing it per save;
(b) hover latency p50/p99 over many hovers (answered from the in-memory index);
(c) open-to-diagnostics for a file already in the cache, after a server restart;
(d) the server process's resident set (the server only, not its workers);
(e) the first model's diagnostics after the server starts (process start, initialize,
    open at once, nothing cached; the worker warms from ``initialize``) against a
    fresh ``python`` that imports torch and exports the same model.

Run: ``.venv/bin/python bench/bench_server.py`` (about four minutes on two cores).

``--start-methods [SAVES]`` measures instead, in one run, (a)'s save-to-diagnostics of
the small model with the workers' two start methods (``startMethod`` ``fork``, then
``spawn``: every job a fresh interpreter, one started ahead; see
``core/isolation/spawning.py``), 1.5 s apart and back to back, against torch's warm
re-run measured between the saves and a fresh ``python`` per save.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lsprotocol import types  # noqa: E402

from tests.server.lsp_client import EXAMPLES, Doc, RecordingClient, running_server  # noqa: E402

SAVES = 8
HOVERS = 500

BIG = '''"""A deep MLP: well over 100 graph nodes."""

import torch
from torch import nn


class Deep(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(16, 16) for _ in range(40))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x)) * 1.0 + 0.0
        return x


model = Deep()
example_args = (torch.randn(2, 16),)
'''

TORCH_WARM = """
import importlib.util, sys, time, statistics, torch
spec = importlib.util.spec_from_file_location("m", sys.argv[1]); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
def once():
    ep = torch.export.export(m.model, m.example_args).run_decompositions({})
    return len(ep.graph.nodes)
once()
times = []
for _ in range(5):
    t = time.perf_counter(); n = once(); times.append(time.perf_counter() - t)
print(statistics.median(times) * 1000, n)
"""

TORCH_WARM_SERVE = """
import importlib.util, sys, time, torch
models = {}
for line in sys.stdin:
    path = line.strip()
    if path not in models:
        spec = importlib.util.spec_from_file_location("m%d" % len(models), path); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
        models[path] = m
        torch.export.export(m.model, m.example_args).run_decompositions({})
    m = models[path]
    t = time.perf_counter(); torch.export.export(m.model, m.example_args).run_decompositions({})
    print((time.perf_counter() - t) * 1000, flush=True)
"""


class WarmTorch:
    """torch's warm export in its own process, asked between our saves: the
    baseline sees the same machine load as the measurement next to it."""

    def __init__(self, script: str | None = None) -> None:
        """``script`` reads a model path per line and prints its export's ms (default:
        torch's warm export of plain models)."""
        self.proc = subprocess.Popen([sys.executable, "-c", script or TORCH_WARM_SERVE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def ms(self, path: Path) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{path}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()


TORCH_FRESH = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("m", sys.argv[1]); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
torch.export.export(m.model, m.example_args).run_decompositions({})
"""


def torch_warm_ms(path: Path) -> tuple[float, int]:
    out = subprocess.run([sys.executable, "-c", TORCH_WARM, str(path)], capture_output=True, text=True, check=True).stdout.split()
    return float(out[-2]), int(out[-1])


def fresh_python_ms(path: Path, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", TORCH_FRESH, str(path)], capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


SAVE_GAP_S = 1.5  # the "saves 1.5 s apart"; 0 = the next save right after the previous result


async def save_latency(doc: Doc, gap_s: float, warm: WarmTorch) -> tuple[list[float], list[float]]:
    """(ours, torch's warm export) per save of the open ``doc``; the baseline runs in
    the pause before each save (or after all of them when there is no pause), never
    beside ours. One open document for every pass: its versions never repeat."""
    client, path = doc.client, doc.path
    times, baseline = [], []
    salt = 1000 if gap_s else 2000  # each pass's texts are new: never a cache hit
    for i in range(salt, salt + SAVES):
        if gap_s:
            # A user pauses between saves; the worker uses it to fork and warm the
            # next job process (core/isolation/forking.py, standby). The baseline
            # runs mid-pause, once that warm-up is over, so neither slows the other.
            t = time.perf_counter()
            await asyncio.sleep(gap_s / 2)
            baseline.append(warm.ms(path))
            await asyncio.sleep(max(0.0, gap_s - (time.perf_counter() - t)))
        started = time.perf_counter()
        # A new line each time: the text (and so the cache key) changes, the model does not.
        version = doc.replace("return x", f"x = x + {i}.0 - {i}.0\n        return x")
        doc.save()
        await client.diagnostics_for(doc.uri, version)
        times.append((time.perf_counter() - started) * 1000)
    if not gap_s:
        baseline = [warm.ms(path) for _ in range(SAVES)]
    return times, baseline


async def hover_latency(client: RecordingClient, path: Path) -> tuple[list[float], int]:
    doc = Doc(client, path)
    doc.open()
    await client.diagnostics_for(doc.uri, 1)
    lines = doc.text.split("\n")
    points = [(n, c) for n, line in enumerate(lines) for c in range(0, len(line), 3)]
    times, answered = [], 0
    for i in range(HOVERS):
        line, column = points[i % len(points)]
        started = time.perf_counter()
        found = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(doc.uri), doc.position(line, column)))
        times.append((time.perf_counter() - started) * 1000)
        answered += found is not None
    return times, answered


def pool_ms(paths: list[Path], runs: int = 5) -> dict[str, float]:
    """The same exports straight on a warm WorkerPool: the core's cost without the server."""
    from exportlens.core.isolation.pool import WorkerPool
    from exportlens.core.model.request import ExportRequest

    out: dict[str, float] = {}
    with WorkerPool(1) as pool:
        pool.wait_ready()
        ids = iter(range(1, 1000))
        for path in paths:
            text = path.read_text()
            list(pool.run([ExportRequest(id=next(ids), path=str(path), source=text, root=str(path.parent))]))
            times = []
            for i in range(runs):
                source = text.replace("return x", f"x = x + {i}.0 - {i}.0\n        return x", 1)
                started = time.perf_counter()
                list(pool.run([ExportRequest(id=next(ids), path=str(path), source=source, root=str(path.parent))]))
                times.append((time.perf_counter() - started) * 1000)
            out[path.name] = statistics.median(times)
    return out


async def first_open_ms(model: Path, runs: int = 3) -> tuple[list[float], list[float], list[float]]:
    """(start -> diagnostics, open -> diagnostics, a fresh python's export right
    after) for a fresh server and cache each run."""
    totals, opens, fresh = [], [], []
    for _ in range(runs):
        work = Path(tempfile.mkdtemp(prefix="bench-first-"))
        path = work / model.name
        path.write_text(model.read_text())
        started = time.perf_counter()
        async with running_server("visual-studio-code", work, {"cache_dir": str(work / "cache")}) as (client, _):
            doc = Doc(client, path)
            opened = time.perf_counter()
            doc.open()
            await client.diagnostics_for(doc.uri, 1)
            done = time.perf_counter()
        totals.append((done - started) * 1000)
        opens.append((done - opened) * 1000)
        fresh.append(fresh_python_ms(path, runs=1))
    return totals, opens, fresh


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-server-"))
    small, big = work / "counter.py", work / "deep.py"
    small.write_text((EXAMPLES / "counter.py").read_text())
    big.write_text(BIG)
    cached = [work / f"cached_{i}.py" for i in range(5)]
    for p in cached:
        p.write_text((EXAMPLES / "clean.py").read_text())
    options = {"cache_dir": str(work / "cache")}

    baselines = {p.name: torch_warm_ms(p) for p in (small, big)}
    fresh = {p.name: fresh_python_ms(p) for p in (small, big)}
    direct = pool_ms([small, big])
    first_total, first_open, first_fresh = await first_open_ms(small)

    warm = WarmTorch()
    async with running_server("visual-studio-code", work, options) as (client, _):
        latency = {}
        for p in (small, big):
            doc = Doc(client, p)
            doc.open()
            await client.diagnostics_for(doc.uri, 1)
            for gap in (SAVE_GAP_S, 0.0):
                latency[(p.name, gap)] = await save_latency(doc, gap, warm)
            doc.close()
        hovers, answered = await hover_latency(client, small)
        for p in cached:  # fill the cache for (c)
            doc = Doc(client, p)
            doc.open()
            await client.diagnostics_for(doc.uri, 1)
        assert client._server is not None
        rss = rss_mb(client._server.pid)
    warm.close()

    async with running_server("visual-studio-code", work, options) as (client, _):
        opens = []
        for p in cached:
            doc = Doc(client, p)
            started = time.perf_counter()
            doc.open()
            await client.diagnostics_for(doc.uri, 1)
            opens.append((time.perf_counter() - started) * 1000)
        status = await client.command("exportlens.status", doc.uri)
        assert client._server is not None
        rss_cached = rss_mb(client._server.pid)

    print(f"(a) save -> diagnostics, median of {SAVES} saves (warm worker, cache misses); torch's warm export of the same model measured between the saves")
    for name in (small.name, big.name):
        nodes = baselines[name][1]
        for gap in (SAVE_GAP_S, 0.0):
            ours_all, warm_all = latency[(name, gap)]
            ours, warm_ms = statistics.median(ours_all), statistics.median(warm_all)
            budget = warm_ms * 1.1 + 30
            pace = f"{gap:g} s apart" if gap else "back to back"
            print(
                f"    {name:10s} {nodes:4d} nodes, {pace:13s}: exportlens {ours:6.0f} ms | torch warm export {warm_ms:6.0f} ms"
                f" (overhead {ours - warm_ms:+5.0f} ms, {ours / warm_ms:4.2f}x; target <= 1.1x + 30 = {budget:.0f} ms: {'met' if ours <= budget else 'NOT met'})"
            )
        print(f"    {'':10s}       fresh python per save {fresh[name]:6.0f} ms; same export straight on a warm WorkerPool: {direct[name]:6.0f} ms (torch warm, separate run: {baselines[name][0]:.0f} ms)")
    print(f"(b) hover: p50 {pct(hovers, 0.5):.2f} ms, p99 {pct(hovers, 0.99):.2f} ms over {HOVERS} hovers ({answered} answered); target p99 <= 10 ms")
    print(f"(c) open -> diagnostics from the cache after a restart: median {statistics.median(opens):.0f} ms, max {max(opens):.0f} ms (workers {status['workers']}); target <= 100 ms")
    print(f"(d) server RSS: {rss:.0f} MB after (a)-(b), {rss_cached:.0f} MB for the cache-only server; target <= 100 MB")
    total, baseline = statistics.median(first_total), statistics.median(first_fresh)
    print(
        f"(e) first model after start ({small.name}, opened right after initialize, nothing cached): start -> diagnostics"
        f" median {total:.0f} ms (runs {', '.join(f'{t:.0f}' for t in first_total)}), open -> diagnostics {statistics.median(first_open):.0f} ms"
        f" | fresh python import torch + export {baseline:.0f} ms ({total / baseline:4.2f}x; target <= 0.8x: {'met' if total <= 0.8 * baseline else 'NOT met'})"
    )


async def start_methods(saves: int) -> None:
    """Save -> diagnostics with fork and with spawn, and torch's two baselines."""
    global SAVES
    SAVES = saves
    work = Path(tempfile.mkdtemp(prefix="bench-startmethods-"))
    small = work / "counter.py"
    small.write_text((EXAMPLES / "counter.py").read_text())
    fresh = fresh_python_ms(small)
    warm = WarmTorch()
    rows = []
    for method in ("fork", "spawn"):
        options = {"cache_dir": str(work / f"cache-{method}"), "startMethod": method}
        async with running_server("visual-studio-code", work, options) as (client, _):
            doc = Doc(client, small)
            doc.open()
            await client.diagnostics_for(doc.uri, 1)
            for gap in (SAVE_GAP_S, 0.0):
                ours, theirs = await save_latency(doc, gap, warm)
                rows.append((method, gap, statistics.median(ours), statistics.median(theirs)))
            doc.close()
    warm.close()
    print(f"save -> diagnostics of {small.name}, median of {SAVES} saves (cache misses), by start method; torch's warm re-run measured between the saves")
    for method, gap, ours, theirs in rows:
        pace = f"{gap:g} s apart" if gap else "back to back"
        print(f"    {method:5s} {pace:13s}: exportlens {ours:6.0f} ms | torch warm re-run {theirs:6.0f} ms ({ours / theirs:5.2f}x) | fresh python per save {fresh:6.0f} ms ({ours / fresh:4.2f}x)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--start-methods"]:
        asyncio.run(start_methods(int(sys.argv[2]) if len(sys.argv) > 2 else 4))
    else:
        asyncio.run(main())
