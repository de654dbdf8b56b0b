"""Models of deployment size: ``exportlens check`` against torch's own fake-weights export.

Writes (into a temporary folder, never the repository) five model files and a sparse,
sharded 70B bf16 safetensors checkpoint (headers only: the data are holes), then for
each file measures, in the same run:

- ``exportlens check FILE --no-cache --format json`` (the CLI, its worker and job), and
- the floor: a fresh ``python`` that builds the same model under
  ``torch._subclasses.fake_tensor.FakeTensorMode`` and runs
  ``torch.export.export(...).run_decompositions({})``. Plain FakeTensorMode cannot run
  every file as written (``.to(dtype)`` of fake parameters raises, a RoPE loop or
  ``trunc_normal_`` reads values), so the floor builds those the way a user would have
  to by hand: in the target dtype, with the table computed outside the fake mode, with
  no init. The 70B checkpoint's floor is plain ``python`` (transformers maps the
  shards without reading them).

For each: wall time, the peak proportional memory (PSS) of the whole process tree, the
ratios, and whether the signature and ranges equal the floor's. Targets (issue 20):
every Llama at <= 1.3x the floor + 2 s and <= 2 GB; the 70B within the default timeout.

    .venv/bin/python bench/bench_bigmodels.py [--only NAME ...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

from exportlens.core.project.settings import DEFAULT_TIMEOUT_S

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

# The Hugging Face configs of the shapes people deploy (no download: built from these).
CONFIGS = {
    "1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048),
    "8b": dict(
        hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072,
        rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    ),
    "70b": dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192, rope_theta=500000.0),
}

HF_FILE = """
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import exportlens

CONFIG = {config!r}
DTYPE = {dtype}
DYNAMIC = {{"input_ids": {{1: torch.export.Dim("seq", min=2, max=4096)}}}}


def build_model(baseline=False):
    config = LlamaConfig(**CONFIG, use_cache=False)
    if baseline and DTYPE is not None:  # fake parameters cannot be cast: build in the dtype
        previous = torch.get_default_dtype()
        torch.set_default_dtype(DTYPE)
        try:
            return LlamaForCausalLM(config).eval()
        finally:
            torch.set_default_dtype(previous)
    model = LlamaForCausalLM(config).eval()
    return model.to(DTYPE) if DTYPE is not None else model


def inputs():
    return (), {{"input_ids": torch.randint(0, 1000, (1, 16))}}


@exportlens.target(dynamic_shapes=DYNAMIC)
def {name}():
    return (build_model(), *inputs())
"""

# A decoder written as deployment code is (tests/fixtures/weights/deploy.py), at
# Llama-3-8B's sizes.
DEPLOY_SIZES = "DIM, LAYERS, HEADS, KV_HEADS, HIDDEN, VOCAB, MAX_SEQ = 256, 2, 4, 2, 512, 1000, 64  # SIZES"
DEPLOY_SOURCE = (ROOT / "tests" / "fixtures" / "weights" / "deploy.py").read_text()
assert DEPLOY_SIZES in DEPLOY_SOURCE, "the fixture's SIZES line moved"


def deploy_file(sizes: str) -> str:
    """The deployment-style decoder with ``sizes`` (``DIM, LAYERS, ... = ...``)."""
    return DEPLOY_SOURCE.replace(DEPLOY_SIZES, sizes)


DEPLOY_FILE = deploy_file("DIM, LAYERS, HEADS, KV_HEADS, HIDDEN, VOCAB, MAX_SEQ = 4096, 32, 32, 8, 14336, 128256, 2048")

# Models whose real weights fit in this machine's memory: also exported with them.
REAL_FITS = {"llama_1b"}

PRETRAINED_FILE = """
import os

import torch
from transformers import LlamaForCausalLM

import exportlens

CHECKPOINT = {checkpoint!r}
DTYPE = None
DYNAMIC = {{"input_ids": {{1: torch.export.Dim("seq", min=2, max=4096)}}, "use_cache": None}}


def build_model(baseline=False):
    return LlamaForCausalLM.from_pretrained(CHECKPOINT, dtype=torch.bfloat16).eval()


def inputs():
    return (), {{"input_ids": torch.randint(0, 1000, (1, 16)), "use_cache": False}}


@exportlens.target(dynamic_shapes=DYNAMIC)
def pretrained_70b():
    return (build_model(), *inputs())
"""

# The floor: the same file, its model built under FakeTensorMode (inputs outside it,
# as torch sees the user's), exported and decomposed; prints the signature and ranges.
FLOOR = """
import json, runpy, sys, warnings
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
warnings.simplefilter("ignore")
ns = runpy.run_path(sys.argv[1], run_name="floor")
if sys.argv[2] == "fake":
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = ns["build_model"](baseline=True)
else:
    model = ns["build_model"](baseline=True)
args, kwargs = ns["inputs"]()
ep = torch.export.export(model, args, kwargs, dynamic_shapes=ns["DYNAMIC"]).run_decompositions({})
print(json.dumps({"signature": str(ep.graph_signature), "ranges": {str(k): [str(v.lower), str(v.upper)] for k, v in ep.range_constraints.items()}, "nodes": len(ep.graph.nodes)}))
"""


def write_models(folder: Path, checkpoint: Path) -> dict[str, tuple[Path, str]]:
    """name -> (file, how its floor builds it: "fake" or "real")."""
    files = {
        "llama_1b": (HF_FILE.format(config=CONFIGS["1b"], dtype="None", name="llama_1b"), "fake"),
        "llama_8b_bf16": (HF_FILE.format(config=CONFIGS["8b"], dtype="torch.bfloat16", name="llama_8b_bf16"), "fake"),
        "llama_70b": (HF_FILE.format(config=CONFIGS["70b"], dtype="None", name="llama_70b"), "fake"),
        "deploy_8b": (DEPLOY_FILE, "fake"),
        "pretrained_70b": (PRETRAINED_FILE.format(checkpoint=str(checkpoint)), "real"),
    }
    out = {}
    for name, (text, floor) in files.items():
        path = folder / f"{name}.py"
        path.write_text(textwrap.dedent(text).lstrip())
        out[name] = (path, floor)
    return out


def write_sparse_checkpoint(folder: Path, config: dict[str, Any], shard_bytes: int = 5 << 30) -> None:
    """A Llama checkpoint in bf16 safetensors shards whose data are holes: real headers,
    the sizes of real files (``ls -l``), next to no disk."""
    folder.mkdir(parents=True, exist_ok=True)
    h, inter, kv = config["hidden_size"], config["intermediate_size"], config["num_key_value_heads"] * (config["hidden_size"] // config["num_attention_heads"])
    tensors: list[tuple[str, list[int]]] = [("model.embed_tokens.weight", [config["vocab_size"], h])]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        tensors += [
            (p + "self_attn.q_proj.weight", [h, h]), (p + "self_attn.k_proj.weight", [kv, h]), (p + "self_attn.v_proj.weight", [kv, h]),
            (p + "self_attn.o_proj.weight", [h, h]), (p + "mlp.gate_proj.weight", [inter, h]), (p + "mlp.up_proj.weight", [inter, h]),
            (p + "mlp.down_proj.weight", [h, inter]), (p + "input_layernorm.weight", [h]), (p + "post_attention_layernorm.weight", [h]),
        ]
    tensors += [("model.norm.weight", [h]), ("lm_head.weight", [config["vocab_size"], h])]
    shards: list[list[tuple[str, list[int]]]] = [[]]
    size = 0
    for name, shape in tensors:
        nbytes = math.prod(shape) * 2
        if shards[-1] and size + nbytes > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append((name, shape))
        size += nbytes
    weight_map = {}
    for n, shard in enumerate(shards, start=1):
        filename = f"model-{n:05d}-of-{len(shards):05d}.safetensors"
        header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
        offset = 0
        for name, shape in shard:
            nbytes = math.prod(shape) * 2
            header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + nbytes]}
            offset += nbytes
            weight_map[name] = filename
        raw = json.dumps(header).encode()
        raw += b" " * (-len(raw) % 8)
        with open(folder / filename, "wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw)
            f.truncate(8 + len(raw) + offset)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": sum(math.prod(s) * 2 for _, s in tensors)}, "weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps({**config, "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16", "tie_word_embeddings": False}))


# -- measuring a process tree ----------------------------------------------------------


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(_children(p))
    return out


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(argv: list[str], env: dict[str, str] | None = None, timeout: float = 3600) -> tuple[float, float, str]:
    """``(wall seconds, peak PSS of the process tree in MB, stdout)``."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})}, cwd=ROOT)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, sum(_pss_kb(p) for p in _tree(proc.pid)))
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate(timeout=timeout)
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    if proc.returncode not in (0, 1) or not out.strip():
        raise RuntimeError(f"{argv} exited {proc.returncode}: {err.decode()[-3000:]}")
    return wall, peak / 1024, out.decode()


def _torch_text(signature: dict[str, Any]) -> str:
    ins = [f"{s['name']}: {s['kind']}" + ("" if s["target"] is None else f" target='{s['target']}'") + ("" if "persistent" not in s else f" persistent={s['persistent']}") for s in signature["inputs"]]
    outs = [f"{s['name']}: {s['kind']}" + ("" if s["target"] is None else f" target='{s['target']}'") for s in signature["outputs"]]
    return "\n# inputs\n" + "\n".join(ins) + "\n\n# outputs\n" + "\n".join(outs) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="model names to run (default: all)")
    parser.add_argument("--keep", help="write the files here and keep them")
    args = parser.parse_args()
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="exportlens-bigmodels-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        checkpoint = folder / "llama-70b-sparse"
        models = write_models(folder, checkpoint)
        names = [n for n in models if not args.only or n in args.only]
        if "pretrained_70b" in names and not checkpoint.exists():
            write_sparse_checkpoint(checkpoint, CONFIGS["70b"])
        # A generous limit: a loaded machine must not turn the measurement into a timeout
        # (the column "in default" says whether the export fit the default limit).
        exportlens = [PYTHON, "-m", "exportlens", "check", "--no-cache", "--format", "json", "--timeout", "3600"]
        print(f"{'model':16} {'exportlens':>11} {'floor':>9} {'ratio':>6} {'target s':>9} {'peak MB':>8} {'floor MB':>9} {'in default':>10}  result")
        for name in names:
            path, how = models[name]
            ours_s, ours_mb, out = measure([*exportlens, str(path)])
            floor_s, floor_mb, floor_out = measure([PYTHON, "-c", FLOOR, str(path), how])
            [target] = [t for f in json.loads(out)["files"] for t in f["targets"]]
            floor = json.loads(floor_out.strip().splitlines()[-1])
            same = target["status"] == "ok" and _torch_text(target["signature"]) == floor["signature"]
            ranges = {k: [str(v[0]), str(v[1])] for k, v in target["signature"]["ranges"].items()} if same else None
            same = same and ranges == {k: [lo.replace("int_oo", "None"), hi.replace("int_oo", "None")] for k, (lo, hi) in floor["ranges"].items()}
            verdict = f"{'same as torch' if same else 'DIFFERS'} ({target['status']}, {target.get('weights')} weights, {floor['nodes']} nodes)"
            within = (target.get("export_ms") or 0) <= DEFAULT_TIMEOUT_S * 1000 and target["status"] == "ok"
            print(f"{name:16} {ours_s:10.1f}s {floor_s:8.1f}s {ours_s / floor_s:5.2f}x {1.3 * floor_s + 2:8.1f}s {ours_mb:8.0f} {floor_mb:9.0f} {'yes' if within else 'NO':>10}  {verdict}")
            if name in REAL_FITS:  # also as before weights: real ones, which must give the same result
                real_s, real_mb, real_out = measure([*exportlens, "--weights", "real", str(path)])
                [real] = [t for f in json.loads(real_out)["files"] for t in f["targets"]]
                agrees = real["status"] == target["status"] and real.get("signature") == target.get("signature")
                print(f"{'  --weights real':16} {real_s:10.1f}s {'':>9} {real_s / ours_s:5.2f}x of auto {real_mb:8.0f} MB  {'same result as auto' if agrees else 'DIFFERS from auto'}")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
