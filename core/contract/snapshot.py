"""``exportlens.snapshot.json``: every target's signature as the project recorded it.

One file at the project root (the folder of the nearest pyproject.toml or .git),
committed with the code, read on every check and every editor export. It is written
for review: deterministic (the same signatures give the same bytes), keys sorted,
one target per entry keyed by its file (relative to the root, ``/``-separated) and
its name, one spec per line so that a changed spec is a one-line diff, a newline at
the end. It records what a runtime binds to -- kinds, input names, targets,
``persistent``, dtypes, shapes, devices, ranges -- with symbolic dims named after
the user's ``Dim`` (torch's ``s77`` renumbers when unrelated code changes). Output
names and source lines are left out for the same reason: torch renames graph nodes
and every edit moves lines, and neither is part of what a runtime binds to.

The file is input from the repository, so it is read as untrusted: a merge conflict,
a hand edit, a newer format each become a ``SnapshotError`` with a clear message,
never an exception from deep inside the comparison.
"""

from __future__ import annotations

import json
import math
import os
import stat
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exportlens.core.disk.atomic import write_atomic
from exportlens.core.model.signature import InputSpec, OutputSpec, Signature

SNAPSHOT_NAME = "exportlens.snapshot.json"
# Moves when a reader of the old format would misread the new one; an older
# exportlens refuses a newer file instead of comparing against half of it.
FORMAT_VERSION = 1
MAX_BYTES = 64 * 1024 * 1024  # a larger file is refused, not parsed

Bound = int | None
Range = tuple[Bound, Bound]
Dim = int | str


class SnapshotError(ValueError):
    """A snapshot file that cannot be used: unreadable, not JSON, not this format."""


@dataclass(frozen=True)
class SpecEntry:
    """One input or output spec as recorded. ``name`` is kept for inputs only."""

    kind: str
    arg: str  # tensor, symint, constant, ... (as in the JSON output)
    target: str | None = None
    name: str | None = None
    persistent: bool | None = None  # BUFFER inputs only
    dtype: str | None = None
    shape: tuple[Dim, ...] | None = None
    device: str | None = None
    value: Any = None  # constants: the value; symbolic scalars: the (named) symbol
    class_fqn: str | None = None


@dataclass(frozen=True)
class TargetEntry:
    inputs: tuple[SpecEntry, ...]
    outputs: tuple[SpecEntry, ...]
    ranges: dict[str, Range] = field(default_factory=dict)  # named symbol -> (min, max)


@dataclass(frozen=True)
class Snapshot:
    # file relative to the root ("models/mlp.py") -> target name -> its entry
    files: dict[str, dict[str, TargetEntry]] = field(default_factory=dict)


def snapshot_path(root: str) -> str:
    return os.path.join(root, SNAPSHOT_NAME)


def file_key(root: str, path: str) -> str:
    """How the snapshot names ``path``: relative to the root, with ``/``."""
    return Path(os.path.relpath(os.path.abspath(path), os.path.abspath(root))).as_posix()


# -- a signature as recorded ------------------------------------------------------------

def entry_of(signature: Signature) -> TargetEntry:
    """The recorded form of ``signature``: torch's symbols replaced by the user's
    ``Dim`` names, inside expressions too (``2*s47 + 1`` -> ``2*width + 1``)."""
    rename = signature.named

    def spec(s: InputSpec | OutputSpec, *, keep_name: bool) -> SpecEntry:
        meta = s.arg.meta
        value = s.arg.value
        if s.arg.kind in ("symint", "symfloat", "symbool") and isinstance(value, str):
            value = rename(value)
        elif s.arg.kind != "constant":
            value = None
        return SpecEntry(
            kind=s.kind,
            arg=s.arg.kind,
            target=s.target,
            name=s.arg.name if keep_name else None,
            persistent=s.persistent if isinstance(s, InputSpec) and s.kind == "BUFFER" else None,
            dtype=meta.dtype if meta else None,
            shape=tuple(d if isinstance(d, int) else rename(d) for d in meta.shape) if meta else None,
            device=meta.device if meta else None,
            value=_plain_value(value),
            class_fqn=s.arg.class_fqn if s.arg.kind == "custom_obj" else None,
        )

    return TargetEntry(
        inputs=tuple(spec(s, keep_name=True) for s in signature.inputs),
        outputs=tuple(spec(s, keep_name=False) for s in signature.outputs),
        ranges={rename(k): v for k, v in signature.ranges.items()},
    )


def _plain_value(value: Any) -> Any:
    """What JSON can hold exactly; a non-finite float as its text."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


# -- writing ---------------------------------------------------------------------------


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, allow_nan=False)


def spec_json(spec: SpecEntry, *, output: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": spec.kind, "arg": spec.arg, "target": spec.target}
    if not output:
        out["name"] = spec.name
    if spec.kind == "BUFFER" and not output:
        out["persistent"] = spec.persistent
    if spec.dtype is not None or spec.shape is not None or spec.device is not None:
        out.update(dtype=spec.dtype, shape=list(spec.shape) if spec.shape is not None else None, device=spec.device)
    if spec.arg in ("constant", "symint", "symfloat", "symbool"):
        out["value"] = spec.value
    if spec.arg == "custom_obj":
        out["class_fqn"] = spec.class_fqn
    return out


def dumps(snapshot: Snapshot) -> bytes:
    """The file's bytes: valid JSON laid out by hand so that each spec is one line."""
    out = ["{", f'  "version": {FORMAT_VERSION},', '  "files": {']
    files = sorted(snapshot.files.items())
    for fi, (path, targets) in enumerate(files):
        out.append(f"    {_json(path)}: {{")
        entries = sorted(targets.items())
        for ti, (name, entry) in enumerate(entries):
            out.append(f"      {_json(name)}: {{")
            for side, specs in (("inputs", entry.inputs), ("outputs", entry.outputs)):
                if not specs:
                    out.append(f'        "{side}": [],')
                    continue
                out.append(f'        "{side}": [')
                for si, spec in enumerate(specs):
                    out.append(f"          {_json(spec_json(spec, output=side == 'outputs'))}" + ("," if si < len(specs) - 1 else ""))
                out.append("        ],")
            ranges = {k: list(v) for k, v in sorted(entry.ranges.items())}
            out.append(f'        "ranges": {_json(ranges)}')
            out.append("      }" + ("," if ti < len(entries) - 1 else ""))
        out.append("    }" + ("," if fi < len(files) - 1 else ""))
    out += ["  }", "}"]
    return ("\n".join(out) + "\n").encode("ascii")


def write(path: str, snapshot: Snapshot) -> bool:
    """Write ``snapshot`` atomically (a reader sees the old file or the new one);
    False when the file already holds exactly these bytes (left untouched)."""
    data = dumps(snapshot)
    try:
        if _read_bytes(path) == data:
            return False
    except SnapshotError:
        pass  # replaced below
    write_atomic(path, data, prefix=".exportlens-snapshot-", durable=True)
    return True


# -- reading ---------------------------------------------------------------------------


def loads(data: bytes) -> Snapshot:
    """Parse and validate the file's bytes; ``SnapshotError`` says what is wrong."""
    if len(data) > MAX_BYTES:
        raise SnapshotError(f"the file is over {MAX_BYTES // (1024 * 1024)} MiB")
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise SnapshotError(f"not UTF-8 ({e})") from None
    except json.JSONDecodeError as e:
        hint = " (an unresolved merge conflict?)" if b"<<<<<<<" in data else ""
        raise SnapshotError(f"not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}{hint}") from None
    except RecursionError:
        raise SnapshotError("nested too deeply") from None
    if not isinstance(document, dict):
        raise SnapshotError("the top level is not an object")
    version = document.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise SnapshotError('"version" is missing or not an integer')
    if version > FORMAT_VERSION:
        raise SnapshotError(f"written by a newer exportlens (format {version}; this one reads format {FORMAT_VERSION})")
    files = document.get("files")
    if not isinstance(files, dict):
        raise SnapshotError('"files" is missing or not an object')
    out: dict[str, dict[str, TargetEntry]] = {}
    for path, targets in files.items():
        if not isinstance(targets, dict):
            raise SnapshotError(f"files[{path!r}] is not an object")
        out[path] = {name: _target(entry, f"files[{path!r}][{name!r}]") for name, entry in targets.items()}
    return Snapshot(out)


def _target(data: Any, where: str) -> TargetEntry:
    if not isinstance(data, dict):
        raise SnapshotError(f"{where} is not an object")
    sides = []
    for side in ("inputs", "outputs"):
        specs = data.get(side)
        if not isinstance(specs, list):
            raise SnapshotError(f"{where}.{side} is missing or not a list")
        sides.append(tuple(_spec(s, f"{where}.{side}[{i}]") for i, s in enumerate(specs)))
    ranges = data.get("ranges", {})
    if not isinstance(ranges, dict):
        raise SnapshotError(f"{where}.ranges is not an object")
    parsed: dict[str, Range] = {}
    for symbol, bounds in ranges.items():
        if not (isinstance(bounds, list) and len(bounds) == 2 and all(_is_bound(b) for b in bounds)):
            raise SnapshotError(f"{where}.ranges[{symbol!r}] is not [min, max] (integers or null)")
        parsed[symbol] = (bounds[0], bounds[1])
    return TargetEntry(sides[0], sides[1], parsed)


def _is_bound(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _spec(data: Any, where: str) -> SpecEntry:
    if not isinstance(data, dict):
        raise SnapshotError(f"{where} is not an object")

    def text(key: str, required: bool = False) -> str | None:
        value = data.get(key)
        if value is None and not required:
            return None
        if not isinstance(value, str):
            raise SnapshotError(f"{where}.{key} is {'missing or ' if required else ''}not a string")
        return value

    kind, arg = text("kind", True), text("arg", True)
    assert kind is not None and arg is not None
    persistent = data.get("persistent")
    if persistent is not None and not isinstance(persistent, bool):
        raise SnapshotError(f"{where}.persistent is not true, false or null")
    shape = data.get("shape")
    if shape is not None:
        if not isinstance(shape, list) or not all(isinstance(d, str) or (isinstance(d, int) and not isinstance(d, bool)) for d in shape):
            raise SnapshotError(f"{where}.shape is not a list of sizes and symbols")
        shape = tuple(shape)
    value = data.get("value")
    if not (value is None or isinstance(value, (bool, int, float, str))):
        raise SnapshotError(f"{where}.value is not a number, string, boolean or null")
    return SpecEntry(
        kind=kind,
        arg=arg,
        target=text("target"),
        name=text("name"),
        persistent=persistent,
        dtype=text("dtype"),
        shape=shape,
        device=text("device"),
        value=value,
        class_fqn=text("class_fqn"),
    )


def _read_bytes(path: str) -> bytes | None:
    """The file's bytes, None when it does not exist. Opened without blocking and
    refused unless regular: a FIFO by that name must not hang the server."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise SnapshotError(f"cannot be read ({e.strerror or e})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SnapshotError("is not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_BYTES and (chunk := os.read(fd, 1 << 20)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise SnapshotError(f"cannot be read ({e.strerror or e})") from None
    finally:
        os.close(fd)


# The parsed snapshots of recently read files, with the bytes they came from: the
# server reads the file on every export, and parsing is what is worth saving.
_PARSED: OrderedDict[str, tuple[bytes, Snapshot | SnapshotError]] = OrderedDict()
_PARSED_MAX = 16
_lock = threading.Lock()  # the server reads from its event loop and its io thread


def read(path: str) -> Snapshot | None:
    """The snapshot at ``path``; None when there is none. Raises ``SnapshotError``."""
    path = os.path.abspath(path)
    data = _read_bytes(path)
    if data is None:
        return None
    with _lock:
        cached = _PARSED.get(path)
    if cached is None or cached[0] != data:
        try:
            parsed: Snapshot | SnapshotError = loads(data)
        except SnapshotError as e:
            parsed = e
        cached = (data, parsed)
        with _lock:
            _PARSED[path] = cached
            _PARSED.move_to_end(path)
            while len(_PARSED) > _PARSED_MAX:
                _PARSED.popitem(last=False)
    if isinstance(cached[1], SnapshotError):
        raise SnapshotError(str(cached[1]))
    return cached[1]
