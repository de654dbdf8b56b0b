"""Public API: exported programs as msgpack bytes.

``dumps``/``loads``/``save``/``load`` import torch when called (through
:mod:`exportlens.core.serde.encode` and :mod:`exportlens.core.serde.decode`); ``read_program`` never does, so the server can
show a stored program without paying for torch.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from exportlens.core.disk.atomic import write_atomic
from exportlens.core.serde.codec import SchemaError
from exportlens.core.serde.reader import ProgramModel
from exportlens.core.serde.reader import read_program as _read_program

if TYPE_CHECKING:
    import torch

__all__ = ["dumps", "loads", "save", "load", "read_program", "ProgramModel", "SchemaError"]


def dumps(ep: torch.export.ExportedProgram, *, weights: bool = False) -> bytes:
    """``ep`` as canonical msgpack bytes; with ``weights=True`` parameters, buffers and
    tensor constants are stored as raw little-endian bytes (never pickled)."""
    from exportlens.core.serde.encode import to_bytes

    return to_bytes(ep, weights=weights)


def loads(data: bytes | bytearray | memoryview, *, weights: Any = None) -> torch.export.ExportedProgram:
    """The ``ExportedProgram`` back. ``weights`` (a dict name -> tensor, an
    ``ExportedProgram`` or an ``nn.Module``) supplies state the bytes lack; it wins
    over weights stored in the bytes. Raises :class:`SchemaError` for bad bytes, and
    for bytes without weights that ``weights`` does not supply; nothing else for any
    bytes (a ``weights`` of the wrong type is a ``TypeError``)."""
    from exportlens.core.serde.decode import from_bytes

    return from_bytes(data, weights=weights)


def save(ep: torch.export.ExportedProgram, path: str | os.PathLike[str]) -> None:
    """Write ``dumps(ep, weights=True)`` atomically: a temp file in the same folder,
    then ``os.replace``, so a reader never sees half a file."""
    write_atomic(path, dumps(ep, weights=True), durable=True)


def load(path: str | os.PathLike[str], *, weights: Any = None) -> torch.export.ExportedProgram:
    with open(path, "rb") as f:
        return loads(f.read(), weights=weights)


def read_program(data: bytes | bytearray | memoryview) -> ProgramModel:
    """The bytes as a torch-free :class:`ProgramModel` (signature, nodes, tensor
    metadata, source lines, ranges). Raises :class:`SchemaError` for bad bytes."""
    return _read_program(data)
