"""Checkpoints read for their shapes only, while a model is built with fake weights. Torch.

A checkpoint is the model's weights: exporting never needs them, and reading a 70B
checkpoint's 140 GB is the export's whole cost, or more memory than the machine has.
While a module is being built with fake weights (``FakeWeights.constructing``):

- ``safetensors.safe_open`` (what ``safetensors.torch.load_file`` and transformers'
  ``from_pretrained`` use) reads the file's header only -- the JSON that gives each
  tensor's dtype, shape and place -- and gives a fake tensor for each large entry; an
  entry under the size bound is read for real (norm weights, small buffers);
- ``torch.load`` of a file of at least that size gives fake tensors (torch skips the
  storages' bytes under a fake mode).

A header that is not what safetensors writes (truncated, not JSON, offsets that do not
cover the file) raises :class:`CheckpointError`, naming the file and what is wrong,
where the user's code opened it -- never a read past the end of a mapped file (a
``SIGBUS`` that would end the job).
"""

from __future__ import annotations

import json
import math
import os
import struct
from typing import Any, Callable

import torch

from exportlens.core.export.weights.fake import FakeWeights

MAX_HEADER = 100_000_000  # bytes of JSON safetensors itself accepts
_DTYPES: dict[str, tuple[torch.dtype, int]] = {
    "F64": (torch.float64, 8),
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
    "I16": (torch.int16, 2),
    "I8": (torch.int8, 1),
    "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
    "F8_E4M3": (torch.float8_e4m3fn, 1),
    "F8_E4M3FNUZ": (torch.float8_e4m3fnuz, 1),
    "F8_E5M2": (torch.float8_e5m2, 1),
    "F8_E5M2FNUZ": (torch.float8_e5m2fnuz, 1),
    "C64": (torch.complex64, 8),
    "U64": (torch.uint64, 8),
    "U32": (torch.uint32, 4),
    "U16": (torch.uint16, 2),
}

# The fake mode of the build in progress, if any (set by ``FakeWeights`` users).
active: FakeWeights | None = None


class CheckpointError(ValueError):
    """A checkpoint file whose header does not describe its contents."""


class Entry:
    __slots__ = ("name", "dtype_name", "dtype", "shape", "nbytes")

    def __init__(self, name: str, dtype_name: str, dtype: torch.dtype, shape: list[int], nbytes: int) -> None:
        self.name, self.dtype_name, self.dtype, self.shape, self.nbytes = name, dtype_name, dtype, shape, nbytes


def read_header(path: str) -> tuple[dict[str, Entry], dict[str, str] | None]:
    """The entries and metadata of a safetensors file, checked as safetensors checks them."""
    name = os.path.basename(os.fspath(path))

    def bad(why: str) -> CheckpointError:
        return CheckpointError(f"the safetensors file `{name}` is not valid: {why}")

    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        prefix = f.read(8)
        if len(prefix) < 8:
            raise bad(f"it is {size} bytes long, too short for a header")
        (length,) = struct.unpack("<Q", prefix)
        if length > MAX_HEADER:
            raise bad(f"its header claims {length} bytes, over safetensors' limit of {MAX_HEADER}")
        if 8 + length > size:
            raise bad(f"its header claims {length} bytes but the file has {size - 8} after the length (truncated?)")
        raw = f.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise bad(f"its header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise bad("its header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise bad("its `__metadata__` is not a map of strings")
    entries: dict[str, Entry] = {}
    spans: list[tuple[int, int, str]] = []
    for key, info in header.items():
        if not isinstance(info, dict):
            raise bad(f"the entry `{key}` is not an object")
        dtype_name, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype_name not in _DTYPES:
            raise bad(f"the entry `{key}` has the unknown dtype {dtype_name!r}")
        if not (isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
            raise bad(f"the entry `{key}` has the shape {shape!r}, not a list of sizes")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets) and 0 <= offsets[0] <= offsets[1]):
            raise bad(f"the entry `{key}` has the data offsets {offsets!r}")
        dtype, itemsize = _DTYPES[dtype_name]
        nbytes = math.prod(shape) * itemsize
        if offsets[1] - offsets[0] != nbytes:
            raise bad(f"the entry `{key}` ({dtype_name}{shape}) needs {nbytes} bytes but its offsets span {offsets[1] - offsets[0]}")
        entries[key] = Entry(key, dtype_name, dtype, shape, nbytes)
        spans.append((offsets[0], offsets[1], key))
    end = 0
    for start, stop, key in sorted(spans):
        if start != end:
            raise bad(f"the entry `{key}` starts at byte {start} of the data, not {end}: its entries do not cover the data")
        end = stop
    if end != size - 8 - length:
        raise bad(f"its entries cover {end} bytes of data but the file holds {size - 8 - length} (truncated or padded)")
    return entries, metadata


class FakeSlice:
    """What ``safe_open(...).get_slice(name)`` gives: shape and dtype, and a tensor when indexed."""

    def __init__(self, file: FakeSafeFile, entry: Entry) -> None:
        self._file, self._entry = file, entry

    def get_shape(self) -> list[int]:
        return list(self._entry.shape)

    def get_dtype(self) -> str:
        return self._entry.dtype_name

    def __getitem__(self, index: Any) -> torch.Tensor:
        if self._entry.nbytes < self._file.weights.min_bytes:
            return self._file.real().get_slice(self._entry.name)[index]
        shape = torch.empty(self._entry.shape, dtype=self._entry.dtype, device="meta")[index].shape
        return self._file.weights.fake_from(tuple(shape), self._entry.dtype)


class FakeSafeFile:
    """``safe_open`` over a file's header: fake tensors for its large entries."""

    def __init__(self, original: Callable[..., Any], weights: FakeWeights, filename: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.weights = weights
        self._original, self._filename, self._args, self._kwargs = original, filename, args, kwargs
        self._entries, self._metadata = read_header(os.fspath(filename))
        self._real: Any = None

    def real(self) -> Any:
        """The file opened by safetensors itself, for the small entries read for real."""
        if self._real is None:
            self._real = self._original(self._filename, *self._args, **self._kwargs).__enter__()
        return self._real

    def __enter__(self) -> FakeSafeFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._real is not None:
            self._real.__exit__(None, None, None)
            self._real = None

    def keys(self) -> list[str]:
        return sorted(self._entries)

    def offset_keys(self) -> list[str]:
        return list(self._entries)

    def metadata(self) -> dict[str, str] | None:
        return self._metadata

    def get_slice(self, name: str) -> FakeSlice:
        return FakeSlice(self, self._entry(name))

    def get_tensor(self, name: str) -> torch.Tensor:
        return self.get_slice(name)[...]

    def get_tensors(self) -> dict[str, torch.Tensor]:
        return {name: self.get_tensor(name) for name in self.keys()}

    def _entry(self, name: str) -> Entry:
        entry = self._entries.get(name)
        if entry is None:
            raise CheckpointError(f"the safetensors file `{os.path.basename(os.fspath(self._filename))}` has no tensor named {name!r}")
        return entry


def safe_open_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """``safetensors.safe_open`` as it behaves while a module is built with fake weights."""

    def safe_open(filename: Any, framework: Any, *args: Any, **kwargs: Any) -> Any:
        device = kwargs.get("device", args[0] if args else "cpu")
        weights = active
        if weights is None or str(framework) not in ("pt", "torch", "pytorch") or str(device) != "cpu":
            return original(filename, framework, *args, **kwargs)
        return FakeSafeFile(original, weights, filename, (framework, *args), kwargs)

    safe_open.__doc__ = getattr(original, "__doc__", None)
    return safe_open


def fake_load(original: Callable[..., Any], f: Any, *args: Any, **kwargs: Any) -> Any:
    """``torch.load`` as it behaves while a module is built with fake weights: a file
    of at least the size bound is loaded without its storages' bytes."""
    weights = active
    if weights is None or not isinstance(f, (str, os.PathLike)):
        return original(f, *args, **kwargs)
    try:
        size = os.path.getsize(f)
    except OSError:
        size = 0  # let torch.load say what is wrong with it
    if size < weights.min_bytes:
        return original(f, *args, **kwargs)
    with weights.mode:
        out = original(f, *args, **kwargs)
    weights.made += 1
    weights.made_bytes += size
    return out


def install_safetensors() -> None:
    """Route ``safetensors.safe_open`` through :func:`safe_open_for`, where the package
    is installed; ``safetensors.torch`` binds the name at its import, so both."""
    try:
        import safetensors
        import safetensors.torch
    except ImportError:
        return
    if getattr(safetensors.safe_open, "__exportlens__", False):
        return
    patched = safe_open_for(safetensors.safe_open)
    patched.__exportlens__ = True  # type: ignore[attr-defined]
    for module in (safetensors, safetensors.torch):
        setattr(module, "safe_open", patched)  # noqa: B010 - a builtin type the stubs name
