"""Weights as raw little-endian bytes with dtype and shape (never pickle), both ways,
and how the loaded state splits into ``state_dict`` and ``constants`` as torch keeps them.

A weight record is ``[name sid, role, dtype sid, shape, requires_grad, bytes]``
(:mod:`exportlens.core.serde.schema`). A sparse tensor (COO or CSR: Whisper keeps its
``alignment_heads`` as a sparse buffer) adds a seventh field with its layout and its
dense parts (indices and values), each stored like a plain tensor; the decoder
rebuilds it with torch's own invariant checks, so hostile indices are a
:class:`SchemaError` instead of a tensor that reads out of bounds later.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
from torch.export import graph_signature as gs
from torch.export.exported_program import ExportedProgram

from exportlens.core.serde import schema as S
from exportlens.core.serde.codec import SchemaError

MAX_RANK = 64

__all__ = ["collect_weights", "split_state", "tensor_from_record", "weights_from_arg", "MAX_RANK"]


# The largest element count a sparse tensor's declared shape may have: torch counts
# elements in int64, and a sparse shape costs no memory, so only overflow is refused.
MAX_NUMEL = (1 << 63) - 1


def _raw(t: torch.Tensor) -> bytes:
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    raw = flat.view(torch.uint8) if flat.numel() else flat.new_empty(0, dtype=torch.uint8)
    data = raw.numpy().tobytes()
    if sys.byteorder != "little" and t.element_size() > 1:  # pragma: no cover - big-endian hosts
        data = b"".join(data[i : i + t.element_size()][::-1] for i in range(0, len(data), t.element_size()))
    return data


def _part(s: Callable[[str], int], t: torch.Tensor) -> list[Any]:
    return [s(str(t.dtype).removeprefix("torch.")), list(t.shape), _raw(t)]


def tensor_record(s: Callable[[str], int], name: str, role: int, t: torch.Tensor) -> list[Any]:
    from exportlens.core.torchcompat import FakeTensor

    if isinstance(t, FakeTensor) or t.is_meta:
        raise ValueError(
            f"weight {name!r} has no values (a {'fake' if isinstance(t, FakeTensor) else 'meta'} tensor of shape {list(t.shape)}): "
            "the program comes from a model built without weights (exportlens builds large ones so by default, as "
            "torch.export's fake mode does); store it without weights (dumps(ep)), or export a model built with real "
            "weights (weights = \"real\") to save them"
        )
    if t.is_quantized or type(t) not in (torch.Tensor, torch.nn.Parameter):
        raise ValueError(f"weight {name!r}: only plain tensors (strided, sparse COO or CSR) can be stored without pickle")
    head = [s(name), role, s(str(t.dtype).removeprefix("torch.")), list(t.shape), bool(t.requires_grad)]
    if t.layout == torch.strided:
        return [*head, _raw(t)]
    t = t.detach()
    if t.layout == torch.sparse_coo:
        # Indices and values as torch holds them (not coalesced here: the flag says which).
        sparse = [s(S.SPARSE_COO), bool(t.is_coalesced()), _part(s, t._indices()), _part(s, t._values())]
    elif t.layout == torch.sparse_csr:
        sparse = [s(S.SPARSE_CSR), False, _part(s, t.crow_indices()), _part(s, t.col_indices()), _part(s, t.values())]
    else:
        raise ValueError(f"weight {name!r}: layout {t.layout} cannot be stored (only strided, sparse COO and sparse CSR)")
    return [*head, b"", sparse]


def collect_weights(ep: torch.export.ExportedProgram, s: Callable[[str], int]) -> list[Any]:
    params = set(ep.graph_signature.parameters)
    out = []
    for name in sorted(ep.state_dict):
        out.append(tensor_record(s, name, S.W_PARAMETER if name in params else S.W_BUFFER, ep.state_dict[name]))
    for name in sorted(ep.constants):
        c = ep.constants[name]
        if isinstance(c, torch.Tensor):
            out.append(tensor_record(s, name, S.W_CONSTANT, c))
    return out


def _dtype(name: str, dtype_name: str) -> tuple[torch.dtype, int]:
    itemsize = S.DTYPE_SIZES.get(dtype_name)
    dtype = getattr(torch, dtype_name, None)
    if itemsize is None or not isinstance(dtype, torch.dtype):
        raise SchemaError(f"weight {name!r}: unknown dtype {dtype_name!r}")
    return dtype, itemsize


def _numel(name: str, shape: Any) -> int:
    if type(shape) is not list or len(shape) > MAX_RANK or not all(type(d) is int and d >= 0 for d in shape):
        raise SchemaError(f"weight {name!r}: malformed shape")
    numel = 1
    for d in shape:
        numel *= d
    return numel


def tensor_from_record(st: list[str], rec: Any) -> tuple[str, int, torch.Tensor]:
    name, role, dtype_sid, shape, requires_grad, data = rec[:6]
    name = st[name]
    dtype_name = st[dtype_sid]
    dtype, _ = _dtype(name, dtype_name)
    if len(rec) > 6:
        t = _sparse(st, name, dtype, shape, rec[6])
    else:
        t = _dense(name, dtype_name, shape, data)
    if requires_grad and (dtype.is_floating_point or dtype.is_complex):
        t.requires_grad_(True)
    return name, role, t


def _sparse(st: list[str], name: str, dtype: torch.dtype, shape: Any, sparse: Any) -> torch.Tensor:
    if type(sparse) is not list or len(sparse) < 4 or type(sparse[1]) is not bool or _numel(name, shape) > MAX_NUMEL:
        raise SchemaError(f"weight {name!r}: malformed sparse record")
    layout = st[sparse[0]]
    parts = []
    for part in sparse[2:5]:
        if type(part) is not list or len(part) != 3:
            raise SchemaError(f"weight {name!r}: malformed sparse part")
        parts.append(_dense(name, st[part[0]], part[1], part[2]))
    if parts[-1].dtype != dtype or any(p.dtype not in (torch.int32, torch.int64) for p in parts[:-1]):
        raise SchemaError(f"weight {name!r}: sparse indices must be int32/int64 and values {dtype}")
    try:
        # check_invariants: indices in bounds and parts of consistent sizes, checked by
        # torch before anything reads through them.
        if layout == S.SPARSE_COO and len(parts) == 2:
            t = torch.sparse_coo_tensor(parts[0], parts[1], shape, check_invariants=True)
            # The flag is not trusted: coalescing really sorts and merges duplicates.
            return t.coalesce() if sparse[1] else t
        if layout == S.SPARSE_CSR and len(parts) == 3:
            return torch.sparse_csr_tensor(parts[0], parts[1], parts[2], shape, check_invariants=True)
    except (RuntimeError, ValueError, TypeError, IndexError) as e:
        first = str(e).strip().split("\n", 1)[0][:200]
        raise SchemaError(f"weight {name!r}: inconsistent sparse tensor: {first}") from None
    raise SchemaError(f"weight {name!r}: unknown sparse layout {layout[:40]!r}")


def _dense(name: str, dtype_name: str, shape: Any, data: Any) -> torch.Tensor:
    dtype, itemsize = _dtype(name, dtype_name)
    numel = _numel(name, shape)
    if type(data) is not bytes:
        raise SchemaError(f"weight {name!r}: malformed data")
    if numel * itemsize != len(data):
        raise SchemaError(f"weight {name!r}: {len(data)} bytes for {dtype_name}{shape}")
    if numel == 0:
        t = torch.empty(shape, dtype=dtype)
    else:
        raw = bytearray(data)
        if sys.byteorder != "little" and itemsize > 1:  # pragma: no cover - big-endian hosts
            raw = bytearray(b"".join(raw[i : i + itemsize][::-1] for i in range(0, len(raw), itemsize)))
        t = torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)
    return t


def weights_from_arg(weights: Any) -> dict[str, Any]:
    if isinstance(weights, ExportedProgram):
        return {**weights.state_dict, **weights.constants}
    if isinstance(weights, torch.nn.Module):
        named: dict[str, Any] = dict(weights.named_parameters(remove_duplicate=False))
        named.update(weights.named_buffers(remove_duplicate=False))
        return named
    if isinstance(weights, dict):
        return dict(weights)
    raise TypeError(f"weights must be a dict, an ExportedProgram or an nn.Module, not {type(weights).__name__}")


def _lookup(module: Any, name: str) -> Any:
    obj = module
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def split_state(sig: gs.ExportGraphSignature, pool: dict[str, Any], module: Any) -> tuple[dict, dict]:
    """Which names go to ``state_dict`` and which to ``constants``, as torch keeps them."""
    state: dict[str, Any] = {}
    consts: dict[str, Any] = {}
    missing = []
    for spec in sig.input_specs:
        kind = spec.kind
        if kind not in (gs.InputKind.PARAMETER, gs.InputKind.BUFFER, gs.InputKind.CONSTANT_TENSOR, gs.InputKind.CUSTOM_OBJ):
            continue
        name = spec.target
        assert name is not None
        dest = state if kind == gs.InputKind.PARAMETER or (kind == gs.InputKind.BUFFER and spec.persistent) else consts
        value = pool.get(name)
        if value is None and module is not None:
            value = _lookup(module, name)
        if value is None:
            missing.append(name)
            continue
        if kind == gs.InputKind.PARAMETER and not isinstance(value, torch.nn.Parameter):
            value = torch.nn.Parameter(value, requires_grad=value.requires_grad)
        dest[name] = value
    if missing:
        # A SchemaError (a ValueError): the bytes alone do not make a whole program.
        raise SchemaError(f"weights missing for {', '.join(missing)[:200]}: pass weights= (dict, ExportedProgram or module)")
    return state, consts
