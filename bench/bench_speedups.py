"""What each speed-up of the isolation layer gains, on this Python and platform.

Each speed-up has a switch, an environment variable the worker reads at import ("0"
turns it off). This times, for each one, the workload it was made for, through a real
one-worker fork pool (``WorkerPool``): a request with a fresh source (a save) to its
result. The pool runs everything on, then with that one switch off:

- standby job process (``EXPORTLENS_STANDBY``): a plain model, saves a pause apart;
- hot pages (``EXPORTLENS_HOT_PAGES``): a tiny transformers BERT saved back to back,
  where a standby that warms by a tiny export is not ready in time;
- fake-tensor answers (``EXPORTLENS_FAKE_CACHE``): the tiny BERT, saves a pause apart;
- preloading (``EXPORTLENS_PRELOAD``): the tiny BERT, saves a pause apart, once the
  worker preloaded transformers;
- the frame-stack chunk (``EXPORTLENS_FRAME_STACK``): a model of nested blocks, deep
  in Python frames, saves a pause apart;
- everything off (``EXPORTLENS_SPEEDUPS=off``, each switch "0" as well): the tiny BERT.

The BERT's config is tiny and built here (no download), as in
``bench/bench_libraries.py``. The decision records in ``docs/decisions/`` say what each
was measured to gain, and on which workload.

The switches are read at import, so each configuration runs in its own process with
its own pool. For a row, a round starts an "on" and an "off" process side by side,
warms both, then alternates their saves (on, off, off, on...) with a settle pause
before each. Load drifts on a shared machine then hit both. Each save is one number;
a row prints the medians over all rounds, off/on of the medians, and the median of
off/on pair by pair (``paired``), which a drift of the load between pairs leaves alone. A switch that no file under
``core/`` names yet is said so in the row: its off column then measures noise.

Run: ``.venv/bin/python bench/bench_speedups.py`` (9.5 minutes on two cores under a
load of 5 to 6); ``--quick`` for fewer saves (7.5 minutes under a load of 6 to 9);
``--only standby,preloading`` for some rows. The load average is printed before and
after. At 4 saves a configuration, two identical ones differed by up to a third under
that load: a row far from 1 at ``--quick`` is a hint, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SWITCHES = ("EXPORTLENS_STANDBY", "EXPORTLENS_HOT_PAGES", "EXPORTLENS_FAKE_CACHE", "EXPORTLENS_PRELOAD", "EXPORTLENS_FRAME_STACK")
ALL_OFF = "EXPORTLENS_SPEEDUPS"
WARMUPS = 3  # untimed saves per process (--quick: 2): the standby's hot pages, jobs' lessons, fake-tensor answers
PAUSE_S = 1.0  # before each save: the worker's idle work (answers, lessons, standby) is done
PRELOAD_WAIT_S = 120.0  # at most, for the worker to preload transformers after the warm-up saves
PRELOAD_QUIET_S = 3.0  # and then no more preloading for this long (a family's own modules come later)
MARK = "@@ "  # the child's answers on its stdout

sys.path.insert(0, str(ROOT / "bench"))
from bench_libraries import BERT, PLAIN  # noqa: E402  (the same models as its rows)

# Blocks nested in blocks: the export's calls go deep in Python frames and back.
DEEP = """import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.inner = Block(depth - 1) if depth else None

    def forward(self, x):
        x = torch.relu(self.fc(x)) * 0.5 + x
        return self.inner(x) if self.inner is not None else x


model = Block(24).eval()
example_args = (torch.randn(2, 16),)
"""

MODELS = {"plain.py": PLAIN, "bert.py": BERT, "deep.py": DEEP}


@dataclass(frozen=True)
class Row:
    """One speed-up: its name, the environment that turns it off, its workload."""

    name: str
    off: tuple[tuple[str, str], ...]
    model: str
    back_to_back: bool
    workload: str


ROWS = (
    Row("standby", (("EXPORTLENS_STANDBY", "0"),), "plain.py", False, "plain model, saves apart"),
    Row("hot pages", (("EXPORTLENS_HOT_PAGES", "0"),), "bert.py", True, "tiny BERT, back to back"),
    Row("fake answers", (("EXPORTLENS_FAKE_CACHE", "0"),), "bert.py", False, "tiny BERT, saves apart"),
    Row("preloading", (("EXPORTLENS_PRELOAD", "0"),), "bert.py", False, "tiny BERT, saves apart"),
    Row("frame stack", (("EXPORTLENS_FRAME_STACK", "0"),), "deep.py", False, "25 nested blocks, saves apart"),
    Row("all off", ((ALL_OFF, "off"), *((s, "0") for s in SWITCHES)), "bert.py", False, "tiny BERT, saves apart"),
)


def read_here(variable: str, root: Path = ROOT / "core") -> bool:
    """Whether any Python file under ``root`` names ``variable``: a switch no file
    reads turns nothing off."""
    return any(variable in path.read_text(errors="replace") for path in root.rglob("*.py"))


def order(round_: int, save: int) -> tuple[bool, bool]:
    """Which configuration saves first at ``save`` of ``round_`` (True: on): on, off,
    then off, on, and each round begins with the other one, so neither is always
    the one right after the other's idle work."""
    first = (round_ + save) % 2 == 0
    return first, not first


def ratio(off: list[float], on: list[float]) -> float:
    """off/on of the medians: above 1, the speed-up gains."""
    return statistics.median(off) / statistics.median(on)


def paired(off: list[float], on: list[float]) -> float:
    """The median of off/on save by save: each pair ran one right after the other, so
    a drift of the machine's load between pairs cancels out."""
    return statistics.median(b / a for a, b in zip(on, off, strict=True))


def table(rows: list[tuple[Row, list[float], list[float], str]]) -> list[str]:
    """The printed table: a line per row, then the notes."""
    lines = [f"{'speed-up':13s} {'workload':30s} {'on ms':>8s} {'off ms':>8s} {'off/on':>7s} {'paired':>7s} {'n':>3s}  note"]
    for row, on, off, note in rows:
        medians = f"{statistics.median(on):8.0f} {statistics.median(off):8.0f} {ratio(off, on):7.2f} {paired(off, on):7.2f}"
        lines.append(f"{row.name:13s} {row.workload:30s} {medians} {len(on):3d}  {note}")
    return lines


def expects_preload(model: str, env: dict[str, str]) -> bool:
    """Whether a pool in ``env`` preloads ``model``'s library while idle."""
    return "transformers" in MODELS[model] and env.get("EXPORTLENS_PRELOAD", "1") != "0" and env.get(ALL_OFF, "") != "off"


class Child:
    """A process with a one-worker fork pool in ``env``, saving ``path`` on command."""

    def __init__(self, path: Path, env: dict[str, str], log: Path) -> None:
        self.log = log
        self._stderr = open(log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", str(path)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True, cwd=ROOT
        )

    def send(self, command: dict[str, object]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def ask(self, command: dict[str, object]) -> dict[str, object]:
        self.send(command)
        return self.answer()

    def answer(self) -> dict[str, object]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(MARK):
                return json.loads(line[len(MARK) :])  # type: ignore[no-any-return]
        raise RuntimeError(f"the bench's child exited ({self.proc.wait()}); its log: {self.log}\n{self.log.read_text()[-3000:]}")

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


def measure(row: Row, rounds: int, saves: int, warmups: int, work: Path) -> tuple[list[float], list[float], str]:
    """The row's saves, on and off; a note when something was off the plan."""
    base = {k: v for k, v in os.environ.items() if k not in (*SWITCHES, ALL_OFF, "EXPORTLENS_TRACE")}
    envs = {True: base, False: {**base, **dict(row.off)}}
    times: dict[bool, list[float]] = {True: [], False: []}
    notes = []
    for r in range(rounds):
        children = {on: Child(work / row.model, envs[on], work / f"{row.name.replace(' ', '-')}-{r}-{'on' if on else 'off'}.log") for on in (True, False)}
        try:
            for child in children.values():
                child.answer()  # ready
            for on, child in children.items():  # both at once: nothing timed yet
                child.send({"warm": warmups, "preload": expects_preload(row.model, envs[on])})
            for on, child in children.items():
                if child.answer().get("preload_missing"):
                    notes.append(f"{'on' if on else 'off'}: transformers not preloaded after {PRELOAD_WAIT_S:g} s")
            for k in range(saves):
                for on in order(r, k):
                    done = children[on].ask({"save": 1000 * (r + 1) + k, "back_to_back": row.back_to_back})
                    times[on].append(float(done["ms"]))  # type: ignore[arg-type]
                    if done.get("preloaded"):
                        notes.append(f"{'on' if on else 'off'}: the worker preloaded during a timed save")
                    print(f"    {row.name} {'on' if on else 'off'} {float(done['ms']):.0f} ms", file=sys.stderr, flush=True)  # type: ignore[arg-type]
        finally:
            for child in children.values():
                child.close()
    unread = [name for name, _ in row.off if not read_here(name)]
    if unread:
        notes.insert(0, f"{', '.join(unread)} not read by core/ here")
    return times[True], times[False], "; ".join(dict.fromkeys(notes))


def child(path: Path) -> None:
    """Answer the parent's commands with a one-worker fork pool: ``warm`` (untimed
    saves, then wait for preloading), ``save`` (a pause, then one timed save, after an
    untimed one when back to back). In a pause the pool reads the worker's messages,
    as the server's does."""
    from exportlens.core.isolation.pool import PoolEvent, WorkerPool
    from exportlens.core.isolation.startmethod import StartMethod
    from exportlens.core.model.request import ExportRequest, Limits

    text = path.read_text()
    preloaded: list[PoolEvent] = []
    ids = iter(range(1, 1_000_000))

    def say(answer: dict[str, object]) -> None:
        print(MARK + json.dumps(answer), flush=True)

    def on_event(event: PoolEvent) -> None:
        if event.kind == "preloaded":
            preloaded.append(event)
        if event.kind in ("restart", "gave-up"):
            print(f"pool: {event.kind} {event.detail}", file=sys.stderr, flush=True)

    with WorkerPool(1, start_method=StartMethod("fork", "the bench"), on_event=on_event) as pool:

        def save(salt: int) -> float:
            request = ExportRequest(id=next(ids), path=str(path), source=f"{text}\n_save = {salt}\n", root=str(path.parent), limits=Limits(600))
            started = time.perf_counter()
            (result,) = pool.run([request])
            elapsed = (time.perf_counter() - started) * 1000
            bad = [t for t in result.targets if t.status != "ok"]
            if bad or not result.targets:
                raise SystemExit(f"the bench's model did not export: {result}")
            return elapsed

        def idle(seconds: float) -> None:
            """The pool reading the worker's messages for ``seconds``, no request."""
            stop = threading.Event()

            def end() -> None:
                stop.set()
                pool.wake()

            timer = threading.Timer(seconds, end)
            timer.start()
            for _ in pool.serve(stop):
                pass
            timer.join()

        def has_library() -> bool:
            return any("transformers" in event.detail for event in preloaded)

        pool.wait_ready()
        say({"ready": True})
        for line in sys.stdin:
            command = json.loads(line)
            if "warm" in command:
                for i in range(int(command["warm"])):
                    idle(PAUSE_S)
                    save(-1 - i)
                end = time.monotonic() + PRELOAD_WAIT_S
                while command["preload"] and time.monotonic() < end:
                    seen = len(preloaded)
                    idle(PRELOAD_QUIET_S if has_library() else 0.5)
                    if has_library() and len(preloaded) == seen:
                        break
                say({"preload_missing": bool(command["preload"] and not has_library())})
            else:
                salt = int(command["save"])
                idle(PAUSE_S)
                if command["back_to_back"]:
                    save(-salt)
                seen = len(preloaded)
                say({"ms": save(salt), "preloaded": len(preloaded) > seen})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 warm-up saves and 4 timed ones a row, not 3 and 8")
    parser.add_argument("--rounds", type=int, default=1, help="fresh on/off process pairs per row (default 1)")
    parser.add_argument("--saves", type=int, help="timed saves per process and round (default 8; --quick 4)")
    parser.add_argument("--only", help="comma-separated row names, e.g. 'standby,preloading'")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    rounds = args.rounds
    saves = args.saves or (4 if args.quick else 8)
    wanted = [name.strip() for name in args.only.split(",")] if args.only else [row.name for row in ROWS]
    unknown = set(wanted) - {row.name for row in ROWS}
    if unknown:
        parser.error(f"no row {', '.join(sorted(unknown))}; rows: {', '.join(row.name for row in ROWS)}")
    work = Path(tempfile.mkdtemp(prefix="bench-speedups-"))
    for name, source in MODELS.items():
        (work / name).write_text(source)
    before = os.getloadavg()
    started = time.monotonic()
    results = []
    for row in (row for row in ROWS if row.name in wanted):
        on, off, note = measure(row, rounds, saves, 2 if args.quick else WARMUPS, work)
        results.append((row, on, off, note))
        print(f"  {row.name}: on {statistics.median(on):.0f} ms, off {statistics.median(off):.0f} ms", file=sys.stderr, flush=True)
    after = os.getloadavg()
    print(f"request -> result of a save (fresh source), one-worker fork pool; medians of {rounds} round(s) x {saves} saves per configuration")
    print(f"Python {platform.python_version()} on {platform.platform()}, torch {metadata.version('torch')}, transformers {metadata.version('transformers')}, {os.cpu_count()} cores")
    print(f"load average before {before[0]:.1f} {before[1]:.1f} {before[2]:.1f}, after {after[0]:.1f} {after[1]:.1f} {after[2]:.1f}; {time.monotonic() - started:.0f} s")
    print("\n".join(table(results)))
    for row, on, off, _ in results:
        print(f"  {row.name}: on {' '.join(f'{x:.0f}' for x in on)} | off {' '.join(f'{x:.0f}' for x in off)}")
    if any(row.name == "frame stack" for row, *_ in results):
        from exportlens.core.isolation import framestack

        print(f"frame stack on this Python: {framestack.state().why}")


if __name__ == "__main__":
    main()
