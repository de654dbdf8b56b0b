"""Safe, canonical msgpack encoding of schema dataclasses (torch-free).

Works on any dataclass whose fields are ``Annotated[type, field_id]`` — exportlens's
own :mod:`exportlens.core.schema` and torch's ``torch._export.serde.schema`` alike —
so the torch side and the torch-free reader share one codec.

Encoding is canonical: maps keyed by field id in ascending order, string-keyed maps
sorted, fields equal to their default left out, floats always 64-bit. The same
object always gives the same bytes.

Decoding treats the input as hostile. msgpack is told the input's own size as the
limit of every declared length (a 10-byte input cannot make it allocate a 2**32
array), ext types are refused, map keys must be ``str`` or ``int`` and unique, and
nesting is bounded. Unknown field ids are skipped (a newer minor version); a
different major version is refused. Every failure is a :class:`SchemaError` — a
``ValueError`` — with a message saying where; nothing else escapes.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

import msgpack

__all__ = ["SchemaError", "encode", "to_tree", "unpack", "from_tree", "decode", "check_version", "MAX_DEPTH"]

T = TypeVar("T")
MAX_DEPTH = 96  # dataclass/union levels; a graph nests ~4 per higher-order op level
_MSGPACK_ERRORS = (msgpack.exceptions.UnpackException, ValueError, TypeError, OverflowError, RecursionError, MemoryError)


class SchemaError(ValueError):
    """The bytes are not a valid program of a version this reader understands."""


# -- encode --------------------------------------------------------------------------


def _is_union(cls: type) -> bool:
    return any(b.__name__ == "_Union" for b in cls.__mro__[1:])


@functools.cache
def _fields(cls: type) -> tuple[tuple[int, str, Any, Any], ...]:
    """(id, name, type, default) per field, by id; default is ``_REQUIRED`` if none."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if typing.get_origin(tp) is not typing.Annotated or not isinstance(tp.__metadata__[0], int):
            raise TypeError(f"{cls.__name__}.{f.name} has no field id (Annotated[type, id])")
        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = _REQUIRED
        out.append((tp.__metadata__[0], f.name, tp.__origin__, default))
    out.sort(key=lambda x: x[0])
    ids = [x[0] for x in out]
    if len(set(ids)) != len(ids):
        raise TypeError(f"{cls.__name__} reuses a field id")
    return tuple(out)


@functools.cache
def _tag_ids(cls: type) -> dict[str, int]:
    return {name: fid for fid, name, _, _ in _fields(cls)}


_REQUIRED = object()


def to_tree(obj: Any) -> Any:
    """A schema object as plain msgpack-able data, canonically ordered."""
    if obj is None or isinstance(obj, (bool, str, bytes)):
        return obj
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (int, float)):
        return obj
    if isinstance(obj, (list, tuple)):
        return [to_tree(x) for x in obj]
    if isinstance(obj, dict):
        return {k: to_tree(obj[k]) for k in sorted(obj)}
    cls = type(obj)
    if dataclasses.is_dataclass(cls):
        if _is_union(cls):
            return {_tag_ids(cls)[str(obj.type)]: to_tree(obj.value)}
        out = {}
        for fid, name, _, default in _fields(cls):
            v = getattr(obj, name)
            if default is not _REQUIRED and type(v) is type(default) and v == default:
                continue
            out[fid] = to_tree(v)
        return out
    raise TypeError(f"cannot encode {cls.__name__}")


def encode(obj: Any) -> bytes:
    """Canonical msgpack bytes of a schema object."""
    return msgpack.packb(to_tree(obj), use_bin_type=True, use_single_float=False)


# -- decode --------------------------------------------------------------------------


def _pairs(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for k, v in pairs:
        if type(k) is not str and type(k) is not int:
            raise SchemaError(f"map key of type {type(k).__name__}: only str and int keys are allowed")
        if k in out:
            raise SchemaError(f"duplicate map key {k!r}")
        out[k] = v
    return out


def _no_ext(code: int, data: bytes) -> Any:
    raise SchemaError(f"msgpack ext type {code} is not allowed")


def unpack(data: bytes | bytearray | memoryview) -> Any:
    """Raw msgpack -> python data, with every declared length bounded by ``len(data)``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SchemaError(f"expected bytes, got {type(data).__name__}")
    n = len(data)
    if n == 0:
        raise SchemaError("empty input")
    try:
        return msgpack.unpackb(
            data,
            raw=False,
            use_list=True,
            strict_map_key=False,  # int field ids; _pairs restricts keys to str/int
            object_pairs_hook=_pairs,
            ext_hook=_no_ext,
            max_bin_len=n,
            max_str_len=n,
            max_array_len=n,
            max_map_len=n,
            max_ext_len=0,
        )
    except SchemaError:
        raise
    except _MSGPACK_ERRORS as e:
        raise SchemaError(f"malformed msgpack: {type(e).__name__}: {e}") from None


Decoder = Callable[[Any, int, str], Any]


def _fail(path: str, msg: str) -> SchemaError:
    return SchemaError(f"{path or '<root>'}: {msg}")


@functools.cache
def _decoder(tp: Any) -> Decoder:
    """A decoding function for type ``tp``: (value, depth, path) -> object."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _decoder(tp.__origin__)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union type {tp}")
        inner = _decoder(args[0])
        return lambda v, d, p: None if v is None else inner(v, d, p)
    if origin is list:
        (item_tp,) = typing.get_args(tp)
        item = _decoder(item_tp)

        def dec_list(v: Any, d: int, p: str) -> Any:
            if type(v) is not list:
                raise _fail(p, f"expected a list, got {type(v).__name__}")
            return [item(x, d, p) for x in v]

        return dec_list
    if origin is dict:
        key_tp, val_tp = typing.get_args(tp)
        val = _decoder(val_tp)

        def dec_dict(v: Any, d: int, p: str) -> Any:
            if type(v) is not dict:
                raise _fail(p, f"expected a map, got {type(v).__name__}")
            for k in v:
                if type(k) is not key_tp:
                    raise _fail(p, f"map key {k!r} is not {key_tp.__name__}")
            return {k: val(x, d, f"{p}[{k!r}]") for k, x in v.items()}

        return dec_dict
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = {m.value: m for m in tp}

        def dec_enum(v: Any, d: int, p: str) -> Any:
            if type(v) is not int or v not in values:
                raise _fail(p, f"{v!r} is not a known {tp.__name__}")
            return values[v]

        return dec_enum
    if tp is float:

        def dec_float(v: Any, d: int, p: str) -> Any:
            if type(v) is float or type(v) is int:
                return float(v)
            raise _fail(p, f"expected a float, got {type(v).__name__}")

        return dec_float
    if tp in (int, bool, str, bytes):

        def dec_scalar(v: Any, d: int, p: str) -> Any:
            if type(v) is not tp:
                raise _fail(p, f"expected {tp.__name__}, got {type(v).__name__}")
            return v

        return dec_scalar
    if tp is typing.Any:
        return lambda v, d, p: v
    if dataclasses.is_dataclass(tp):
        return _dataclass_decoder(typing.cast(type, tp))
    raise TypeError(f"unsupported schema type {tp!r}")


def _dataclass_decoder(cls: type) -> Decoder:
    is_union = _is_union(cls)
    name = cls.__name__
    table: dict[int, tuple[str, Any, Any]] | None = None

    def get_table() -> dict[int, tuple[str, Any, Any]]:
        nonlocal table
        if table is None:  # lazily: recursive types refer to themselves
            table = {fid: (fname, _decoder(ftp), default) for fid, fname, ftp, default in _fields(cls)}
        return table

    def dec(v: Any, d: int, p: str) -> Any:
        if d > MAX_DEPTH:
            raise _fail(p, f"nesting deeper than {MAX_DEPTH}")
        if type(v) is not dict:
            raise _fail(p, f"expected a {name} map, got {type(v).__name__}")
        tab = get_table()
        if is_union:
            if len(v) != 1:
                raise _fail(p, f"a {name} union must have exactly one tag, got {len(v)}")
            ((tag, x),) = v.items()
            entry = tab.get(tag)
            if entry is None:
                raise _fail(p, f"unknown {name} tag {tag!r}")
            fname, fdec, _ = entry
            return cls.create(**{fname: fdec(x, d + 1, f"{p}.{fname}")})  # type: ignore[attr-defined]
        kwargs = {}
        for fid, x in v.items():
            entry = tab.get(fid)
            if entry is None:
                continue  # a field from a newer minor version
            fname, fdec, _ = entry
            kwargs[fname] = fdec(x, d + 1, f"{p}.{fname}")
        for fname, _fdec, default in tab.values():
            if fname not in kwargs:
                if default is _REQUIRED:
                    raise _fail(p, f"{name} lacks required field {fname!r}")
                if isinstance(default, (list, dict)):
                    kwargs[fname] = type(default)()
        return cls(**kwargs)

    return dec


def from_tree(cls: type[T], tree: Any, path: str = "") -> T:
    """Raw data (from :func:`unpack`) -> an instance of schema class ``cls``."""
    try:
        return _decoder(cls)(tree, 0, path)  # type: ignore[no-any-return, arg-type]
    except SchemaError:
        raise
    except RecursionError:
        raise _fail(path, "nesting too deep") from None
    except (TypeError, ValueError, AttributeError, AssertionError, KeyError) as e:
        raise _fail(path, f"invalid {cls.__name__}: {type(e).__name__}: {e}") from None


def check_version(tree: Any, expected: tuple[int, int], field_id: int = 1, what: str = "exportlens") -> tuple[int, int]:
    """Read ``[major, minor]`` at ``field_id``; refuse a different major version."""
    if type(tree) is not dict:
        raise SchemaError(f"expected a {what} program map, got {type(tree).__name__}")
    version = tree.get(field_id)
    if type(version) is not list or len(version) < 2 or not all(type(x) is int for x in version[:2]):
        raise SchemaError(f"missing or malformed {what} schema version: {version!r}")
    major, minor = version[0], version[1]
    if major != expected[0]:
        raise SchemaError(
            f"{what} schema version {major}.{minor} is not readable by this version "
            f"(schema {expected[0]}.{expected[1]}): major versions differ"
        )
    return major, minor


def decode(cls: type[T], data: bytes | bytearray | memoryview, expected: tuple[int, int], version_field: int = 1) -> T:
    """Bytes -> ``cls``, checking the version at ``version_field`` first."""
    tree = unpack(data)
    check_version(tree, expected, version_field)
    return from_tree(cls, tree)
