"""What a job forked from the worker lacks that torch's warm re-run has: one model's
export, CPU time only (no server, no IPC), in processes forked as the worker forks
them.

Prints, for a tiny transformers BERT and the plain example model, the median CPU
time of ``export`` + ``run_decompositions`` of a freshly built model

(1) in a fork of a worker-like process (torch and transformers imported, the tiny
    warm-up export run, heap frozen) that wrote the warm-up's hot pages first, as
    the standby does -- with nothing carried over from earlier jobs;
(2) the same, after that process answered the fake-tensor questions an earlier
    fork of it asked (``core/isolation/speedups/fakecache.py``) -- what a save after the
    first one of a model gets;
(3) in a fork of a process that itself exported the model before forking: every
    per-process cache warm, the floor of any fork-per-job design;
(4) in the process itself, exporting again: torch's warm re-run.

(2) against (4) is what is left of the gap; (3) against (4) is the part no cache can
remove: a fresh fork's own cost. Run: ``.venv/bin/python bench/bench_fork_warmth.py``
(about two minutes on two cores).
"""

from __future__ import annotations

import gc
import os
import pickle
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ROUNDS = 8

BERT = """
from transformers import BertConfig, BertModel
import torch

config = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=37, max_position_embeddings=64)
model = BertModel(config).eval()
example_args = (torch.randint(0, 128, (2, 8)),)
"""


def exporter(source: str, name: str) -> Callable[[], float]:
    """Build the model from ``source`` anew and export it; the export's CPU ms."""
    import torch

    code = compile(source, name, "exec")

    def run() -> float:
        namespace: dict[str, object] = {"__name__": "model"}
        exec(code, namespace)
        started = time.process_time()
        torch.export.export(namespace["model"], namespace["example_args"]).run_decompositions({})  # type: ignore[arg-type]
        return (time.process_time() - started) * 1000

    return run


def in_fork(work: Callable[[], object]) -> object:
    """``work()`` in a fork of this process; its value."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, pickle.dumps(work()))
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)


def main() -> None:
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(1)
    import transformers  # noqa: F401 - preloaded, as the worker does

    from exportlens.core.isolation.speedups import fakecache, hotpages
    from exportlens.core.isolation.warmup import prewarm

    prewarm()
    fakecache.install()
    gc.freeze()

    def record() -> bytes:
        mappings = hotpages.writable_mappings()
        before = hotpages.snapshot(mappings)
        prewarm()
        after = hotpages.snapshot(mappings)
        return hotpages.to_bytes(hotpages.written(mappings, before, after)) if before and after else b""

    hot = hotpages.from_bytes(in_fork(record), hotpages.writable_mappings())  # type: ignore[arg-type]

    def as_standby(run: Callable[[], float]) -> Callable[[], float]:
        def work() -> float:
            hotpages.populate(hot)
            return run()

        return work

    models = {"bert (2 layers)": exporter(BERT, "bert.py"), "counter.py": exporter((ROOT / "examples" / "counter.py").read_text(), "counter.py")}
    rows = []
    for label, run in models.items():
        cold = [in_fork(as_standby(run)) for _ in range(ROUNDS)]

        def learn(run: Callable[[], float] = run) -> bytes:
            fakecache.record()
            run()
            return fakecache.questions()

        answers = fakecache.Answers()
        answers.learn(in_fork(learn))  # type: ignore[arg-type]
        added = answers.answer(lambda: False)
        fakecache.settle()
        gc.freeze()
        merged = [in_fork(as_standby(run)) for _ in range(ROUNDS)]
        run()
        gc.freeze()
        warm_parent = [in_fork(as_standby(run)) for _ in range(ROUNDS)]
        run()
        itself = [run() for _ in range(ROUNDS)]
        rows.append((label, added, *(statistics.median(x) for x in (cold, merged, warm_parent, itself))))  # type: ignore[type-var]

    load = os.getloadavg()
    print(f"export + run_decompositions, CPU ms, medians of {ROUNDS}; load {load[0]:.1f} on {os.cpu_count()} cores")
    for label, added, cold, merged, warm_parent, itself in rows:
        print(f"  {label}:")
        for what, ms, note in (
            ("(1) fork of the worker, nothing carried", cold, f"{cold / itself:.2f}x torch's re-run"),
            (f"(2) fork after answering, {added} cache entries", merged, f"{merged / itself:.2f}x"),
            ("(3) fork of a process that exported it", warm_parent, f"{warm_parent / itself:.2f}x: a fork's own cost"),
            ("(4) torch's warm re-run, in process", itself, ""),
        ):
            print(f"    {what:46s} {ms:7.1f}" + (f"  ({note})" if note else ""))


if __name__ == "__main__":
    main()
