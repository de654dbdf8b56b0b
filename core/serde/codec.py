"""Safe msgpack decoding for everything exportlens reads from disk (torch-free).

Decoding treats the input as hostile. msgpack is told the input's own size as the
limit of every declared length (a 10-byte input cannot make it allocate a 2**32
array), ext types are refused, map keys must be ``str`` or ``int`` and unique, and
nesting is bounded by msgpack's own stack limit. A different major version is
refused. Every failure is a :class:`SchemaError` — a ``ValueError`` — with a message
saying what; nothing else escapes.
"""

from __future__ import annotations

from typing import Any

import msgpack

__all__ = ["SchemaError", "unpack", "check_version"]

_MSGPACK_ERRORS = (msgpack.exceptions.UnpackException, ValueError, TypeError, OverflowError, RecursionError, MemoryError)


class SchemaError(ValueError):
    """The bytes are not a valid program of a version this reader understands."""


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
