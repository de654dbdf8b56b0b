"""Parent side of the decode fuzz: batches of payloads decoded in child processes.

Each child (:mod:`decode_child`) imports torch once and decodes a batch, one JSON line
per payload. A child that dies (over its CPU-time or memory limit, or a crash) names
its culprit: the payload after its last line. That payload is recorded as killed and a
new child carries on after it, so one bad payload costs one child start, not the run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

CHILD = Path(__file__).with_name("decode_child.py")
# Wall-clock backstop for one child (the real limits are per payload, in CPU time):
# only a child stuck outside Python's reach, which no payload should cause.
BATCH_WALL_S = 900.0


@dataclass
class Corpus:
    bases: list[bytes]
    inputs: list[dict[str, Any]]  # per base: {"args": [{"shape", "dtype"}], "kwargs": {...}}
    explicit: list[bytes] | None = None

    def write(self, path: Path) -> Path:
        doc: dict[str, Any] = {"bases": self.bases, "inputs": self.inputs}
        if self.explicit is not None:
            doc["explicit"] = self.explicit
        path.write_bytes(msgpack.packb(doc, use_bin_type=True))
        return path


@dataclass
class Report:
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    killed: list[dict[str, Any]] = field(default_factory=list)  # {"i", "returncode", "stderr"}


def _run_batch(corpus_path: Path, seed: int, start: int, stop: int, marker_dir: Path) -> Report:
    report = Report()
    while start < stop:
        cmd = [sys.executable, str(CHILD), str(corpus_path), str(seed), str(start), str(stop), str(marker_dir)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BATCH_WALL_S, cwd=CHILD.parent)
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        report.outcomes.extend(lines)
        done = lines[-1]["i"] + 1 if lines else start
        if proc.returncode == 0 and done == stop:
            break
        if proc.returncode >= 0:  # exited on its own before the end: the harness failed, not a payload
            raise RuntimeError(f"decode child exited {proc.returncode} after payload {done - 1}:\n{proc.stderr[-3000:]}")
        report.killed.append({"i": done, "returncode": proc.returncode, "stderr": proc.stderr[-2000:]})
        start = done + 1
    return report


def decode_in_children(corpus: Corpus, tmp: Path, count: int, *, seed: int = 0, batch: int = 1000, workers: int = 2) -> Report:
    """Decode payloads ``0..count-1`` of ``corpus`` in children, ``batch`` per child."""
    corpus_path = corpus.write(tmp / "corpus.msgpack")
    marker_dir = tmp / "markers"
    marker_dir.mkdir(exist_ok=True)
    ranges = [(s, min(s + batch, count)) for s in range(0, count, batch)]
    total = Report()
    with ThreadPoolExecutor(workers) as pool:
        for r in pool.map(lambda se: _run_batch(corpus_path, seed, se[0], se[1], marker_dir), ranges):
            total.outcomes.extend(r.outcomes)
            total.killed.extend(r.killed)
    total.outcomes.sort(key=lambda o: o["i"])
    return total
