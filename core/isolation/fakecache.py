"""Carrying the fake-tensor dispatch cache a job filled back to the zygote.

Why: tracing runs every operator on fake tensors, and ``FakeTensorMode`` keeps, for
the whole process, the output metadata of each operator call it has seen (op,
input dtypes/shapes/strides, default dtype and device, shape-env settings ->
output metadata). In torch's own warm re-run that cache is full from the previous
run; a job forked from the zygote starts with only what the zygote's tiny warm-up
put there and computes every operator's meta again: ~80 of the ~550 ms of a
2-layer BERT's export on this machine (``bench/bench_libraries.py``).

So a job sends the entries it added (only the process-wide ones: entries that
hold symbolic shapes live in the export's own shape env and die with it), and the
zygote adds them to its cache after the result went out, before it forks the next
standby: a later save of the same model finds them. A save that adds nothing
sends nothing, so this costs only the first export of a model (or of new shapes).

Why the cache stays right: an entry is what torch itself would reuse within one
process; the zygote and the job are one process image (a fork), with the same
torch and the same operator tables. Only ``aten`` and ``prims`` operators are
carried, and only while the operator's kernels and Python tables are the zygote's
(``_fingerprint``): model code that registers its own kernel or decomposition for
an operator keeps that operator's entries in its job.

The bytes come from a process that runs model code, so they are read with an
unpickler that builds only the cache's own types (``_Reader``): anything else is
refused and the whole message is dropped. Up to ``MAX_ENTRIES`` entries are kept
in the zygote (about 1 kB each). Off with ``EXPORTLENS_FAKE_CACHE=0`` (to measure what
it saves).
"""

from __future__ import annotations

import io
import itertools
import os
import pickle
from typing import Any

ENABLED = os.environ.get("EXPORTLENS_FAKE_CACHE", "1") != "0"
MAX_ENTRIES = 20_000
# A standby forked before a merge lacks what it added. Computing a few entries again
# (~0.4 ms each) costs less than a save waiting for a new standby's fork and pages
# (~30 ms): an edit that changes a constant adds one or two; a new model, hundreds.
WORTH_A_NEW_STANDBY = 64
NAMESPACES = ("aten", "prims")


def mark() -> int:
    """How many entries the cache holds now: a job's own entries come after them
    (the cache is a dict, which keeps insertion order)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    return len(FakeTensorMode.cache)


def collect(start: int) -> bytes:
    """The entries added since ``mark()`` said ``start``, with the fingerprint of
    each operator they are for; empty bytes when there are none to carry."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    cache = FakeTensorMode.cache
    if not ENABLED or len(cache) <= start:
        return b""
    entries = []
    prints: dict[str, str] = {}
    for key, entry in itertools.islice(cache.items(), start, None):
        op = key.key[0] if key.key else None
        if not isinstance(op, torch._ops.OpOverload) or op.namespace not in NAMESPACES:
            continue
        name = op.name()
        if name not in prints:
            prints[name] = _fingerprint(op)
        entries.append((key.key, entry))
    if not entries:
        return b""
    buffer = io.BytesIO()
    try:
        _Writer(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump((prints, entries))
    except Exception:  # noqa: BLE001 - an entry this torch makes differently: carry nothing
        return b""
    return buffer.getvalue()


def merge(data: bytes) -> int:
    """Add the carried entries to this process's cache; how many were new. Entries
    of an operator whose fingerprint differs here are left out; bytes that are not
    what ``collect`` writes are ignored whole."""
    import torch
    from torch._subclasses.fake_tensor import (
        FakeTensorMode,
        _DispatchCacheBypassEntry,
        _DispatchCacheKey,
        _DispatchCacheValidEntry,
    )

    cache = FakeTensorMode.cache
    if not data or len(cache) >= MAX_ENTRIES:
        return 0
    try:
        prints, entries = _Reader(io.BytesIO(data)).load()
        if not isinstance(prints, dict) or not isinstance(entries, list):
            return 0
    except Exception:  # noqa: BLE001 - garbage: nothing learned
        return 0
    same: dict[str, bool] = {}
    added = 0
    for item in entries:
        if len(cache) >= MAX_ENTRIES:
            break
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], tuple) and item[0]):
            continue
        key_tuple, entry = item
        if not isinstance(entry, (_DispatchCacheValidEntry, _DispatchCacheBypassEntry)):
            continue
        op = key_tuple[0]
        if not isinstance(op, torch._ops.OpOverload):
            continue
        name = op.name()
        if name not in same:
            same[name] = prints.get(name) == _fingerprint(op)
        if not same[name]:
            continue
        key = _DispatchCacheKey(key_tuple)  # the hash is this process's, not the job's
        if key not in cache:
            cache[key] = entry
            added += 1
    return added


def _fingerprint(op: Any) -> str:
    """What decides an operator's fake result besides its inputs: its kernels in the
    dispatcher, and the Python tables fake tensors consult. Functions are named by
    identity: a job is a fork, so what it did not replace has the zygote's ids."""
    import torch
    from torch._decomp import decomposition_table, meta_table
    from torch._subclasses import fake_impls

    try:
        dump = torch._C._dispatch_dump(op.name())
    except RuntimeError:
        dump = "?"
    kernels = sorted((str(k), id(v)) for k, v in op.py_kernels.items())
    tables = (id(decomposition_table.get(op)), id(meta_table.get(op)), id(fake_impls.op_implementations_dict.get(op)))
    return f"{dump}|{kernels}|{tables}"


class _Writer(pickle.Pickler):
    """Operators by name: the reader looks them up in its own ``torch.ops``."""

    def persistent_id(self, obj: Any) -> Any:
        import torch

        if isinstance(obj, torch._ops.OpOverload):
            return (obj.namespace, obj._opname, obj._overloadname)
        return None


class _Reader(pickle.Unpickler):
    """Builds the cache's own types and nothing else (see the module's text)."""

    def find_class(self, module: str, name: str) -> Any:
        import torch

        if module in _MODULES and "." not in name and name in _MODULES[module]:
            return super().find_class(module, name)
        # A dtype, layout or memory format: ``torch.float32``, or ``torch.contiguous_format``
        # as ``torch._utils`` names it.
        attribute = name.removeprefix("torch.")
        if module in ("torch", "torch._utils") and "." not in attribute:
            value = getattr(torch, attribute, None)
            if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
                return value
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a fake-tensor cache entry")

    def persistent_load(self, pid: Any) -> Any:
        import torch

        if not (isinstance(pid, tuple) and len(pid) == 3 and all(isinstance(p, str) for p in pid)):
            raise pickle.UnpicklingError("not an operator")
        namespace, name, overload = pid
        if namespace not in NAMESPACES:
            raise pickle.UnpicklingError(f"operator of namespace {namespace!r}")
        try:
            op = getattr(getattr(getattr(torch.ops, namespace), name), overload)
        except (AttributeError, RuntimeError) as e:
            raise pickle.UnpicklingError(f"no operator {namespace}::{name}.{overload}") from e
        if not isinstance(op, torch._ops.OpOverload):
            raise pickle.UnpicklingError("not an operator")
        return op


_MODULES: dict[str, frozenset[str]] = {
    "builtins": frozenset({"bool", "dict", "float", "int", "list", "str", "tuple", "type", "complex", "slice", "frozenset", "bytes", "NoneType", "Ellipsis"}),
    "torch": frozenset({"Size", "device", "dtype", "layout", "memory_format"}),
    "torch.serialization": frozenset({"_get_layout"}),
    "torch._subclasses.fake_tensor": frozenset(
        {"SingletonConstant", "TensorMetadata", "_DispatchCacheBypassEntry", "_DispatchCacheEntryOutputInfo", "_DispatchCacheValidEntry"}
    ),
    "torch.fx.experimental.symbolic_shapes": frozenset({"ShapeEnvSettings"}),
}
