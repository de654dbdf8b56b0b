"""Weights as raw little-endian bytes with dtype and shape (never pickle), both ways,
and how the loaded state splits into ``state_dict`` and ``constants`` as torch keeps them.

A weight record is ``[name sid, role, dtype sid, shape, requires_grad, bytes]``
(:mod:`exportlens.core.serde.schema`).
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


def tensor_record(s: Callable[[str], int], name: str, role: int, t: torch.Tensor) -> list[Any]:
    if t.layout != torch.strided or t.is_quantized or type(t) not in (torch.Tensor, torch.nn.Parameter):
        raise ValueError(f"weight {name!r}: only plain strided tensors can be stored without pickle")
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    raw = flat.view(torch.uint8) if flat.numel() else flat.new_empty(0, dtype=torch.uint8)
    data = raw.numpy().tobytes()
    if sys.byteorder != "little" and t.element_size() > 1:  # pragma: no cover - big-endian hosts
        data = b"".join(data[i : i + t.element_size()][::-1] for i in range(0, len(data), t.element_size()))
    return [s(name), role, s(str(t.dtype).removeprefix("torch.")), list(t.shape), bool(t.requires_grad), data]


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


def tensor_from_record(st: list[str], rec: Any) -> tuple[str, int, torch.Tensor]:
    name, role, dtype_sid, shape, requires_grad, data = rec[:6]
    name = st[name]
    dtype_name = st[dtype_sid]
    itemsize = S.DTYPE_SIZES.get(dtype_name)
    dtype = getattr(torch, dtype_name, None)
    if itemsize is None or not isinstance(dtype, torch.dtype):
        raise SchemaError(f"weight {name!r}: unknown dtype {dtype_name!r}")
    if type(shape) is not list or len(shape) > MAX_RANK or not all(type(d) is int and d >= 0 for d in shape) or type(data) is not bytes:
        raise SchemaError(f"weight {name!r}: malformed shape or data")
    numel = 1
    for d in shape:
        numel *= d
    if numel * itemsize != len(data):
        raise SchemaError(f"weight {name!r}: {len(data)} bytes for {dtype_name}{shape}")
    if numel == 0:
        t = torch.empty(shape, dtype=dtype)
    else:
        raw = bytearray(data)
        if sys.byteorder != "little" and itemsize > 1:  # pragma: no cover - big-endian hosts
            raw = bytearray(b"".join(raw[i : i + itemsize][::-1] for i in range(0, len(raw), itemsize)))
        t = torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)
    if requires_grad and (dtype.is_floating_point or dtype.is_complex):
        t.requires_grad_(True)
    return name, role, t


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
