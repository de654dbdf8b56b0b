"""How should the worker start a disposable export process? Measure, then decide.

Prints per-job latency (start the process + export a small model + get the answer
back) for:

  (a) ``os.fork()`` from a warm zygote (torch imported, one export already run);
  (b) ``multiprocessing`` forkserver with torch preloaded and warmed in the server;
  (c) spawn: a fresh interpreter that imports torch itself.

and checks the fork-after-torch hazards: how many threads the zygote has after
warm-up, ``torch.get_num_threads()`` in a forked child, and whether an intra-op
parallel matmul in the child completes (a) when the zygote never ran a parallel op
and (b) when it did (OpenMP pools are the classic post-fork deadlock).

Run: ``.venv/bin/python bench/bench_startmethod.py [N]``
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import warnings

import torch

warnings.simplefilter("ignore")  # torch's pytree deprecation noise in every child

# The forkserver preloads this module (written to a temp dir at run time): it
# imports torch and runs one export, so the server's children start warm.
PRELOAD = """
import time, warnings
warnings.simplefilter("ignore")
import torch

class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.register_buffer("steps", torch.zeros(1))

    def forward(self, x):
        return torch.relu(self.lin(x)) + self.steps

def export_small():
    x = torch.randn(4, 8)
    batch = torch.export.Dim("batch", min=2)
    ep = torch.export.export(Small(), (x,), dynamic_shapes=({0: batch},))
    return len(ep.run_decompositions({}).graph.nodes)

def job(conn):
    conn.send(export_small())
    conn.close()

if WARM:
    export_small()
"""


class Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.register_buffer("steps", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x)) + self.steps


def export_small() -> int:
    """One small export, as a job would do it; returns the node count."""
    x = torch.randn(4, 8)
    batch = torch.export.Dim("batch", min=2)
    ep = torch.export.export(Small(), (x,), dynamic_shapes=({0: batch},))
    ep = ep.run_decompositions({})
    return len(ep.graph.nodes)


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def fork_job(fn, timeout_s: float = 60.0) -> tuple[float, str]:  # type: ignore[no-untyped-def]
    """Fork, run fn in the child, send its result back; (seconds, answer or 'HUNG')."""
    r, w = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.write(w, str(fn()).encode())
        finally:
            os._exit(0)
    os.close(w)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            answer = os.read(r, 1000).decode()
            os.close(r)
            return time.perf_counter() - t0, answer
        time.sleep(0.005)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    os.close(r)
    return time.perf_counter() - t0, "HUNG"


def mp_job(ctx, target) -> float:  # type: ignore[no-untyped-def]
    a, b = ctx.Pipe()
    t0 = time.perf_counter()
    p = ctx.Process(target=target, args=(b,))
    p.start()
    a.recv()
    p.join()
    return time.perf_counter() - t0


def show(label: str, times: list[float]) -> None:
    ms = [t * 1000 for t in times]
    print(
        f"{label:<44} first {ms[0]:7.0f} ms   median {statistics.median(ms):7.0f} ms   "
        f"all {' '.join(f'{m:.0f}' for m in ms)}"
    )


def parallel_matmul() -> str:
    a = torch.randn(1500, 1500)
    for _ in range(3):
        a = torch.tanh(a @ a)
    return f"ok threads={torch.get_num_threads()}"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"torch {torch.__version__}, {os.cpu_count()} cpus, N={n}")
    t0 = time.perf_counter()
    export_small()
    print(f"warm-up export in the zygote: {(time.perf_counter() - t0) * 1000:.0f} ms")
    print(f"zygote threads after warm-up: {threads()} (torch.get_num_threads()={torch.get_num_threads()})")

    # Hazards first, while the zygote has not yet run a parallel op.
    secs, answer = fork_job(lambda: f"{torch.get_num_threads()} threads, {threads()} tasks")
    print(f"forked child sees: {answer}")
    secs, answer = fork_job(parallel_matmul)
    print(f"parallel matmul in child, zygote never ran one: {answer} ({secs * 1000:.0f} ms)")

    show("(a) fork from warm zygote", [fork_job(export_small)[0] for _ in range(n)])

    folder = tempfile.mkdtemp()
    for name, warm in (("el_warm", True), ("el_cold", False)):
        with open(os.path.join(folder, name + ".py"), "w") as f:
            f.write(f"WARM = {warm}\n" + PRELOAD)
    sys.path.insert(0, folder)
    os.environ["PYTHONPATH"] = folder  # for spawned interpreters
    import el_cold  # type: ignore[import-not-found]
    import el_warm  # type: ignore[import-not-found]

    fs = mp.get_context("forkserver")
    fs.set_forkserver_preload(["el_warm"])
    show("(b) forkserver, torch preloaded + warmed", [mp_job(fs, el_warm.job) for _ in range(n)])

    sp = mp.get_context("spawn")
    runs = max(2, n // 2)
    show("(c) spawn (fresh interpreter)", [mp_job(sp, el_cold.job) for _ in range(runs)])

    # The worker's guard: the zygote keeps one thread, so even a big op it runs
    # stays serial and never starts the OpenMP pool; children restore the count.
    full = torch.get_num_threads()
    torch.set_num_threads(1)
    parallel_matmul()

    def restored() -> str:
        torch.set_num_threads(full)
        return parallel_matmul()

    secs, answer = fork_job(restored, timeout_s=30)
    print(f"zygote at 1 thread ran a matmul; child at {full} threads: {answer} ({secs * 1000:.0f} ms)")
    torch.set_num_threads(full)

    # The hazard: the zygote runs an intra-op parallel op, then forks.
    parallel_matmul()
    print(f"zygote threads after a parallel matmul: {threads()}")
    secs, answer = fork_job(parallel_matmul, timeout_s=30)
    print(f"parallel matmul in child after zygote ran one: {answer} ({secs * 1000:.0f} ms)")
    secs, answer = fork_job(export_small, timeout_s=30)
    print(f"export in child after zygote ran one: {answer} nodes ({secs * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
