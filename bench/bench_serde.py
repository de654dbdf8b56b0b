"""exportlens msgpack serde vs torch.export.save/load, on the same programs, in one run.

Prints per program: dumps+loads (no weights) vs torch save+load time, payload bytes vs
torch's JSON payload, and read_program vs torch.export.load time. Run:
``.venv/bin/python bench/bench_serde.py``.
"""

from __future__ import annotations

import copy
import io
import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch._export.db.examples import all_examples
from torch._export.serde.serialize import serialize as torch_serialize

from exportlens import program as P

warnings.filterwarnings("ignore")


def best(fn: Callable[[], Any], n: int = 5, budget_s: float = 0.5) -> float:
    """Best of at least ``n`` runs, more for fast functions (up to ``budget_s``):
    on a shared machine the minimum is the run the scheduler left alone."""
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < n or (time.perf_counter() - started < budget_s and len(times) < 200):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


class Deep(torch.nn.Module):
    def __init__(self, n: int = 40) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.nn.functional.gelu(layer(x)) + x
        return x


def programs() -> dict[str, Any]:
    from transformers import BertConfig, BertModel

    out = {}
    ex = all_examples()
    for name in ("cond_operands", "dynamic_shape_map", "user_input_mutation", "dictionary"):
        c = ex[name]
        out[name] = torch.export.export(copy.deepcopy(c.model), c.example_args, c.example_kwargs, dynamic_shapes=c.dynamic_shapes, strict=False)
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, max_position_embeddings=64)
    out["tiny_bert"] = torch.export.export(BertModel(cfg).eval(), (torch.randint(0, 100, (2, 8)),), strict=False)
    out["deep_mlp_40"] = torch.export.export(Deep(), (torch.randn(4, 16),), strict=False)
    return {k: v.run_decompositions({}) for k, v in out.items()}


def main() -> None:
    rows = []
    for name, ep in programs().items():
        state = {**ep.state_dict, **ep.constants}

        def ours() -> None:
            P.loads(P.dumps(ep), weights=state)

        def torch_rt() -> None:
            buf = io.BytesIO()
            torch.export.save(ep, buf)
            buf.seek(0)
            torch.export.load(buf)

        data = P.dumps(ep)
        buf = io.BytesIO()
        torch.export.save(ep, buf)
        saved = buf.getvalue()
        t_ours, t_torch = best(ours), best(torch_rt)
        t_read = best(lambda: P.read_program(data), 5)
        t_tload = best(lambda: torch.export.load(io.BytesIO(saved)))
        t_dumps = best(lambda: P.dumps(ep))
        t_loads = best(lambda: P.loads(data, weights=state))
        json_len = len(torch_serialize(ep).exported_program)
        nodes = len(ep.graph.nodes)
        rows.append((name, nodes, t_dumps, t_loads, t_ours, t_torch, len(data), json_len, t_read, t_tload))
    print(f"{'program':22} {'nodes':>5} {'dumps ms':>8} {'loads ms':>8} {'ours ms':>8} {'torch ms':>8} {'speedup':>7} {'bytes':>8} {'json':>8} {'ratio':>5} {'read ms':>8} {'load ms':>8} {'read x':>7}")
    for name, nodes, td, tl, to, tt, nb, nj, tr, tload in rows:
        print(
            f"{name:22} {nodes:5d} {td * 1e3:8.2f} {tl * 1e3:8.2f} {to * 1e3:8.2f} {tt * 1e3:8.2f} {tt / to:7.2f} "
            f"{nb:8d} {nj:8d} {nb / nj:5.2f} {tr * 1e3:8.3f} {tload * 1e3:8.2f} {tload / tr:7.1f}"
        )
    speed = geomean([r[5] / r[4] for r in rows])
    size = geomean([r[6] / r[7] for r in rows])
    read = geomean([r[9] / r[8] for r in rows])
    print(
        f"\ngeometric mean: dumps+loads {speed:.1f}x faster than torch save+load (target >= 10x); "
        f"payload {size:.2f}x torch's JSON (target <= 0.5x); read_program {read:.0f}x faster than torch.export.load (target >= 50x)"
    )


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


if __name__ == "__main__":
    main()
