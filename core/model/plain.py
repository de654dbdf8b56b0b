"""Results <-> plain data (dicts, lists, scalars) for msgpack between processes.

A small, generic converter driven by the dataclasses' type hints. Decoding ignores
fields it does not know and rebuilds tuples, so a newer worker's extra fields do not
break an older reader. (The versioned program schema of the cache is a separate,
stricter thing.)
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any, TypeVar

import msgpack

T = TypeVar("T")


class WireError(ValueError):
    """Data that does not decode into the expected result type."""


def to_plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    if obj is None or isinstance(obj, (bool, int, float, str, bytes)):
        return obj
    return repr(obj)


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_plain(tp: Any, data: Any) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return data
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if data is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return from_plain(option, data)
            except (WireError, TypeError, ValueError) as e:
                errors.append(str(e))
        raise WireError(f"{data!r} matches none of {tp}: {errors}")
    if origin is typing.Literal:
        if data not in typing.get_args(tp):
            raise WireError(f"{data!r} is not one of {typing.get_args(tp)}")
        return data
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(data, (list, tuple)):
            raise WireError(f"expected a list, got {type(data).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_plain(args[0], x) for x in data)
        if len(args) != len(data):
            raise WireError(f"expected {len(args)} items, got {len(data)}")
        return tuple(from_plain(a, x) for a, x in zip(args, data, strict=True))
    if origin is dict:
        kt, vt = typing.get_args(tp)
        if not isinstance(data, dict):
            raise WireError(f"expected a map, got {type(data).__name__}")
        return {from_plain(kt, k): from_plain(vt, v) for k, v in data.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise WireError(f"expected a map for {tp.__name__}, got {type(data).__name__}")
        hints = _hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = from_plain(hints[f.name], data[f.name])
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise WireError(f"{tp.__name__} lacks {f.name!r}")
        return tp(**kwargs)
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise WireError(f"expected a number, got {data!r}")
        return float(data)
    if tp in (int, str, bool, bytes):
        if not isinstance(data, tp) or (tp is int and isinstance(data, bool)):
            raise WireError(f"expected {tp.__name__}, got {data!r}")
        return data
    if tp is type(None):
        if data is not None:
            raise WireError(f"expected nil, got {data!r}")
        return None
    raise WireError(f"cannot decode type {tp!r}")


def pack(obj: Any) -> bytes:
    return msgpack.packb(to_plain(obj), use_bin_type=True)


def unpack(tp: type[T], data: bytes) -> T:
    try:
        plain = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several unrelated types
        raise WireError(f"not a valid message: {e}") from e
    return typing.cast(T, from_plain(tp, plain))
