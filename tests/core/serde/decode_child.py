"""The child process of the decode fuzz: decodes payloads under a CPU-time and a memory limit.

Run as ``python decode_child.py CORPUS SEED START STOP MARKER_DIR`` by
:mod:`tests.core.serde.fuzzing`. Payload ``i`` is ``mutated(bases, SEED, i)``, or the
corpus's ``explicit[i]`` when it has such a list. Each payload goes through
``read_program`` and ``loads``; a program that loads is also turned into a module
(``ep.module()`` generates code again) and, when a hostile text was injected into
it, called once. One JSON line per payload says what each step raised, the CPU time
and the peak resident memory it added.

Limits: before each payload ``setitimer(ITIMER_PROF, 5 s)`` arms a CPU-time alarm
whose default action ends the process (CPU time, not wall-clock time: a loaded
machine does not make a payload fail); the address space may grow 1 GiB past what
it was after warm-up (``RLIMIT_AS``). A payload over a limit kills this process; the
parent knows which one it was (the one after the last line) and starts a new child
after it.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
import warnings
from typing import Any

import msgpack
from mutate import mutated

CPU_LIMIT_S = 5.0
MEMORY_LIMIT = 1 << 30


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args, **kwargs)
    except Exception as e:  # the parent judges the type: only SchemaError is allowed
        name = type(e).__name__
        return (name if name == "SchemaError" else f"{name}: {str(e)[:300]}"), None


def _inputs(spec: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    import torch

    def make(s: dict[str, Any]) -> Any:
        return torch.full(s["shape"], 0.5, dtype=getattr(torch, s["dtype"]))

    return tuple(make(s) for s in spec["args"]), {k: make(s) for k, s in spec["kwargs"].items()}


def main(corpus_path: str, seed: int, start: int, stop: int, marker_dir: str) -> None:
    import torch

    from exportlens import program

    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    with open(corpus_path, "rb") as f:
        corpus = msgpack.unpackb(f.read(), raw=False)
    bases: list[bytes] = corpus["bases"]
    explicit: list[bytes] | None = corpus.get("explicit")
    for data, spec in zip(bases, corpus["inputs"], strict=True):  # warm-up: every import and cache the decoders use
        program.read_program(data)
        ep = program.loads(data)
        args, kwargs = _inputs(spec)
        ep.module()(*args, **kwargs)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _status("VmSize") + MEMORY_LIMIT
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    out = sys.stdout
    for i in range(start, stop):
        marker = os.path.join(marker_dir, f"M{i}")
        if explicit is not None:
            base, data, what = -1, explicit[i], "explicit"
        else:
            base, data, what = mutated(bases, seed, i, marker)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets the peak resident size to the current one
        rss0 = _status("VmRSS")
        cpu0 = time.process_time()
        signal.setitimer(signal.ITIMER_PROF, CPU_LIMIT_S)
        read, _ = _outcome(program.read_program, data)
        loads, ep = _outcome(program.loads, data)
        module = called = None
        if ep is not None:
            module, m = _outcome(ep.module)
            if m is not None and what.startswith("structure inject"):
                args, kwargs = _inputs(corpus["inputs"][base])
                called, _ = _outcome(m, *args, **kwargs)
        signal.setitimer(signal.ITIMER_PROF, 0)
        record = {
            "i": i, "base": base, "what": what, "read": read, "loads": loads, "module": module, "called": called,
            "cpu": round(time.process_time() - cpu0, 4), "rss": _status("VmHWM") - rss0, "executed": os.path.exists(marker),
        }  # fmt: skip
        out.write(json.dumps(record) + "\n")
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
