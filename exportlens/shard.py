"""``check --shard K/N``: which model files shard K of N checks, and what its report
records so that ``exportlens merge`` can put the shards back together. Torch-free.

Every runner of a CI matrix computes the assignment on its own, so it depends on
nothing of the machine: each file is named by its path relative to its project root
(``models/mlp.py``, as the snapshot names it), and the order it was found in or the
paths given do not matter. The assignment is consistent hashing with bounded loads
(Mirrokni, Thorup and Zadimoghaddam, 2016): each file ranks the shards by a hash of
its name and the shard's number (rendezvous hashing); the files, slowest first, each
go to the first shard of their ranking that stays under 110 % of the mean load
(``EPSILON``), else to the least loaded. The loads are the times recorded for checking
each file (``result_seconds``) (a committed ``--durations`` file; or, with ``--durations cache``, those of the
results in the cache when it holds every file's; else none), a file without one
counting as the median of the others. So a shard runs at most ~10 % over the mean
unless one file alone is longer, new files spread evenly (each by its own hash), and
adding or removing one file moves few others (a greedy balance in a fixed order would
move every file after it: tests/e2e/test_shard.py measures both).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import logging
import math
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import msgpack

from exportlens.core.cache.keys import exportlens_version, torch_version
from exportlens.core.disk.atomic import write_atomic
from exportlens.core.model.plain import from_plain, to_plain
from exportlens.core.model.results import FileResult
from exportlens.core.project.files import root_of
from exportlens.report import display_path

if TYPE_CHECKING:
    from exportlens.core.pipeline import Pipeline

log = logging.getLogger("exportlens.shard")

EPSILON = 0.1  # a shard's load may exceed the mean by this fraction before a file looks further
UNKNOWN_S = 1.0  # a file's weight when no file has a recorded time
MIN_S = 0.1  # the least weight of a file: starting it costs something even when it fails at once
MAX_SHARDS = 1000
MAX_DURATIONS_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """An argparse type: ``K/N`` with 1 <= K <= N (as Playwright's and Jest's ``--shard``)."""
    index, slash, count = text.partition("/")
    try:
        shard = Shard(int(index), int(count)) if slash else None
    except ValueError:
        shard = None
    if shard is None or not 1 <= shard.index <= shard.count <= MAX_SHARDS:
        raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N <= {MAX_SHARDS} (shard K of N, from 1), got {text!r}")
    return shard


# -- names ----------------------------------------------------------------------------


def file_keys(paths: Iterable[str]) -> dict[str, str]:
    """absolute path -> the name the assignment and the durations file use: the path
    relative to its project root, ``/``-separated. Files of several projects whose
    names collide are named by their path relative to the current folder instead."""
    keys = {p: Path(os.path.relpath(p, root_of(p))).as_posix() for p in paths}
    seen: dict[str, int] = {}
    for key in keys.values():
        seen[key] = seen.get(key, 0) + 1
    for path, key in keys.items():
        if seen[key] > 1:
            keys[path] = Path(os.path.relpath(path)).as_posix()
    return keys


# -- the assignment -------------------------------------------------------------------


def _rank(key: str, count: int) -> list[int]:
    """The shards (0-based) in ``key``'s order of preference: the same on every machine."""
    score = {k: hashlib.sha256(f"{key}\0{k}".encode()).digest() for k in range(count)}
    return sorted(range(count), key=lambda k: score[k], reverse=True)


def weights(keys: Iterable[str], durations: dict[str, float]) -> dict[str, float]:
    """Each file's load: its recorded seconds, else the median of the recorded ones."""
    keys = list(keys)
    known = [durations[k] for k in keys if k in durations]
    guess = statistics.median(known) if known else UNKNOWN_S
    return {k: max(MIN_S, durations.get(k, guess)) for k in keys}


def assign(keys: Iterable[str], durations: dict[str, float], count: int) -> dict[str, int]:
    """key -> its shard, from 1 (see the module's docstring)."""
    load = weights(keys, durations)
    if not load:
        return {}
    cap = max(sum(load.values()) / count * (1 + EPSILON), max(load.values()))
    totals = [0.0] * count
    out: dict[str, int] = {}
    for key in sorted(load, key=lambda k: (-load[k], k)):
        ranked = _rank(key, count)
        shard = next((k for k in ranked if totals[k] + load[key] <= cap * (1 + 1e-9)), None)
        if shard is None:
            shard = min(ranked, key=lambda k: totals[k])
        out[key] = shard + 1
        totals[shard] += load[key]
    return dict(sorted(out.items()))


# -- durations ------------------------------------------------------------------------


class DurationsError(ValueError):
    """A durations file that cannot be used."""


def result_seconds(result: FileResult) -> float | None:
    """What checking ``result``'s file took, as recorded: its job's wall time (loading
    the file, exporting, running and lowering its targets: a small model's export is a
    fraction of that), else its targets' export and lowering times; None when nothing
    was recorded (a result that no job made)."""
    if result.elapsed_ms > 0:
        return result.elapsed_ms / 1000
    times = [t.export_ms for t in result.targets if t.export_ms is not None]
    times += [low.lower_ms for t in result.targets for low in t.lowerings]
    return sum(times) / 1000 if times else None


def read_durations(path: str) -> dict[str, float]:
    """``{"models/mlp.py": 12.5, ...}``: seconds per file; a DurationsError says what is wrong."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_DURATIONS_BYTES + 1)
    except OSError as e:
        raise DurationsError(f"cannot read {path}: {e.strerror or e}") from e
    if len(data) > MAX_DURATIONS_BYTES:
        raise DurationsError(f"{path} is over {MAX_DURATIONS_BYTES} bytes")
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeError) as e:
        raise DurationsError(f"{path} is not JSON: {e}") from e
    if not isinstance(doc, dict):
        raise DurationsError(f"{path} must hold one JSON object, file path -> seconds")
    out: dict[str, float] = {}
    for key, value in doc.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise DurationsError(f"{path}: {key!r} must be a number of seconds (0 or more), not {value!r}")
        out[key] = float(value)
    return out


def write_durations(path: str, recorded: dict[str, float]) -> None:
    """``recorded`` into the durations file at ``path``: its other files' entries are
    kept (another shard recorded them), keys sorted, one per line, tenths of a second
    (finer noise would change the committed file at every run)."""
    kept: dict[str, float] = {}
    if os.path.exists(path):
        kept = read_durations(path)
    kept.update(recorded)
    text = "{\n" + ",\n".join(f"  {json.dumps(k)}: {round(v, 1)}" for k, v in sorted(kept.items())) + "\n}\n"
    try:
        write_atomic(Path(path).absolute(), text.encode(), prefix=".tmp-durations-", durable=True, mode=0o644)
    except OSError as e:
        raise DurationsError(f"cannot write {path}: {e.strerror or e}") from e


def store_durations(path: str, results: Iterable[FileResult], keys: dict[str, str] | None = None) -> None:
    """``--store-durations FILE``: each result's seconds under its file's name (``keys``,
    else ``file_keys``); results without a recorded time leave their entry as it was."""
    results = list(results)
    keys = keys if keys is not None else file_keys([r.path for r in results])
    write_durations(path, {keys[r.path]: s for r in results if r.path in keys and (s := result_seconds(r)) is not None})


# -- what a shard's report records ----------------------------------------------------


def commit_of(folder: str) -> str | None:
    """The git commit checked out in ``folder``, or None (no git, not a repository)."""
    try:
        proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None


def sources_digest(keys: dict[str, str]) -> str:
    """sha256 of every model file's name and bytes: shards of one run read the same files."""
    h = hashlib.sha256()
    for path, key in sorted(keys.items(), key=lambda i: i[1]):
        try:
            with open(path, "rb") as f:
                data = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            data = "unreadable"
        h.update(f"{key}\0{data}\n".encode())
    return h.hexdigest()


def settings_digest(settings: dict[str, Any]) -> str:
    """sha256 of each file's export settings and the environment (exportlens, torch,
    Python): results made under other settings are not one run's."""
    env = {"exportlens": exportlens_version(), "torch": torch_version(), "python": "%d.%d" % sys.version_info[:2]}
    return hashlib.sha256(json.dumps({"env": env, "files": settings}, sort_keys=True).encode()).hexdigest()


def report_block(shard: Shard, assignment: dict[str, int], *, folder: str, commit: str | None, sources: str, settings: str, durations: str, seconds: float, cached: int) -> dict[str, Any]:
    """The JSON report's ``shard`` object: which shard, its files, and what ``merge``
    checks (see docs/contract.md, JSON output)."""
    return {
        "index": shard.index,
        "count": shard.count,
        "files": [k for k, s in assignment.items() if s == shard.index],
        "assignment": assignment,
        "folder": folder,
        "commit": commit,
        "sources": sources,
        "settings": settings,
        "durations": durations,
        "seconds": round(seconds, 3),
        "cached": cached,
    }


def _settings(pipeline: Pipeline, path: str) -> list[Any]:
    request = pipeline.request(path, id=0)
    return [
        request.limits.timeout_s,
        request.limits.memory_mb,
        request.strict_default,
        list(request.lower),
        list(request.keep_lowered),
        request.weights,
        request.memory_budget,
    ]


@dataclass(frozen=True)
class Plan:
    """What shard ``shard`` checks (``files``, absolute) and its report's ``shard`` object
    (``block``, without the run's ``seconds`` and ``cached``)."""

    shard: Shard
    files: list[str]
    keys: dict[str, str]  # every file of the run -> its name
    block: dict[str, Any]


FROM_CACHE = "cache"  # ``--durations cache``: the times of the results in the cache


def _cached_durations(files: list[str], keys: dict[str, str], pipeline: Pipeline) -> dict[str, float] | None:
    """Each file's time from its result in the cache, when the cache holds every file's
    result; else None. Partial knowledge is not used: it grows while the shards run (a
    shard that starts after another stored a result would know more, and assign
    differently). Even "all" changes when a shard stores the last missing result before
    another shard starts, so this is for caches no shard writes while the others start
    (a complete cache, read by shards started together); a committed ``--durations``
    file is what every runner agrees on, always."""
    out: dict[str, float] = {}
    for i, path in enumerate(files):
        hit = pipeline.lookup(pipeline.request(path, id=i))
        if hit is None:
            return None
        out[keys[path]] = result_seconds(hit) or 0.0  # a file that fails before any export is quick
    return out


def plan(files: list[str], pipeline: Pipeline, shard: Shard, durations_path: str | None) -> Plan:
    """Shard ``shard`` of ``files`` (every model file of the run), balanced by the times
    in the file ``durations_path`` (a DurationsError when it cannot be read); with
    ``FROM_CACHE``, by those of the results in the cache when it holds every file's
    (``_cached_durations``); else with every file counting the same."""
    keys = file_keys(files)
    durations: dict[str, float] = {}
    source = "none"
    if durations_path == FROM_CACHE:
        cached = _cached_durations(files, keys, pipeline)
        if cached is not None:
            durations, source = cached, "cache"
    elif durations_path is not None and not os.path.exists(durations_path):
        # Not written yet (a project's first sharded run): every runner lacks it alike.
        log.warning("%s does not exist yet: every file counts the same (check --store-durations %s writes it)", durations_path, durations_path)
    elif durations_path is not None:
        durations, source = {k: v for k, v in read_durations(durations_path).items() if k in keys.values()}, "file"
    assignment = assign(keys.values(), durations, shard.count)
    mine = [p for p in files if assignment[keys[p]] == shard.index]
    root = root_of(files[0]) if files else os.getcwd()
    block = report_block(
        shard, assignment,
        folder=Path(os.path.relpath(os.getcwd(), root)).as_posix(),  # where the report's paths start
        commit=commit_of(root), sources=sources_digest(keys),
        settings=settings_digest({keys[p]: _settings(pipeline, p) for p in files}),
        durations=source, seconds=0.0, cached=0,
    )
    return Plan(shard, mine, keys, block)


# -- the results, for merge -----------------------------------------------------------

# Fields of a result no report prints: what it depended on (for the cache and the
# server), the worker's output, the serialized programs.
_UNPRINTED = {"local_imports": (), "local_import_hashes": (), "written": (), "written_hashes": (), "missing_modules": (), "libraries": (), "library_states": (), "output_tail": ""}


def _printed(result: FileResult) -> FileResult:
    targets = tuple(replace(t, graph="", program=b"", lowerings=tuple(replace(low, model=b"") for low in t.lowerings)) for t in result.targets)
    return replace(result, targets=targets, **_UNPRINTED)  # type: ignore[arg-type]


def _paths(plain: Any, move: Any) -> Any:
    """``plain`` with every ``path`` field passed through ``move``."""
    if isinstance(plain, dict):
        return {k: (move(v) if k == "path" and isinstance(v, str) else _paths(v, move)) for k, v in plain.items()}
    if isinstance(plain, list):
        return [_paths(v, move) for v in plain]
    return plain


def pack_results(results: Iterable[FileResult], cwd: str | None = None) -> str:
    """The results as every format prints them (msgpack, base64), paths relative to the
    current folder as the report writes them: ``merge`` prints them again, in any format,
    exactly as this run would have (the JSON ``files`` alone lose what text and SARIF
    need, such as a diagnostic without an end)."""
    plain = [_paths(to_plain(_printed(r)), lambda p: display_path(p, cwd)) for r in results]
    return base64.b64encode(msgpack.packb(plain, use_bin_type=True)).decode("ascii")


def unpack_results(text: str, cwd: str | None = None) -> list[FileResult]:
    """The reverse of ``pack_results``, paths made absolute against the current folder;
    ValueError (``WireError``) for anything that does not decode."""
    cwd = cwd or os.getcwd()
    try:
        plain = msgpack.unpackb(base64.b64decode(text.encode("ascii"), validate=True), raw=False, strict_map_key=False)
    except Exception as e:  # noqa: BLE001 - binascii, msgpack and unicode errors alike
        raise ValueError(f"the results do not decode: {e}") from e
    if not isinstance(plain, list):
        raise ValueError("the results are not a list")
    return [from_plain(FileResult, _paths(r, lambda p: os.path.normpath(os.path.join(cwd, p)))) for r in plain]
