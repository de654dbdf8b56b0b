"""A cache file on disk: a header (magic, format version, kind, payload length, sha256
of the payload) and a bounded msgpack payload. Anything that does not check out is a
:class:`CorruptEntry`, which the store treats as a miss. Torch-free."""

from __future__ import annotations

import hashlib
import re
import struct
from typing import Any

from exportlens.core.cache.keys import CACHE_FORMAT
from exportlens.core.serde.codec import unpack as bounded_unpack

MAGIC = b"ELC\x00"
# magic, format, kind, payload length, sha256 of the payload
HEADER = struct.Struct(">4sHBI32s")
KIND_ENTRY, KIND_MANIFEST, KIND_TOKENS = 1, 2, 3
SUFFIX = {KIND_ENTRY: ".entry", KIND_MANIFEST: ".manifest", KIND_TOKENS: ".tokens"}
MAX_FILE_BYTES = 64 * 1024 * 1024  # larger cache files are refused on read (and not written)


class CorruptEntry(ValueError):
    """A cache file that does not decode (truncated, garbage, another format)."""


def encode_file(kind: int, payload: bytes) -> bytes:
    return HEADER.pack(MAGIC, CACHE_FORMAT, kind, len(payload), hashlib.sha256(payload).digest()) + payload


def decode_file(kind: int, data: bytes) -> Any:
    """The plain payload of a cache file, or CorruptEntry."""
    if len(data) < HEADER.size:
        raise CorruptEntry(f"{len(data)} bytes, shorter than the header")
    magic, version, found_kind, length, digest = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptEntry("not an exportlens cache file")
    if version != CACHE_FORMAT:
        raise CorruptEntry(f"cache format {version}, this exportlens reads {CACHE_FORMAT}")
    if found_kind != kind:
        raise CorruptEntry(f"kind {found_kind}, expected {kind}")
    payload = data[HEADER.size :]
    if len(payload) != length:
        raise CorruptEntry(f"payload of {len(payload)} bytes, the header says {length} (truncated?)")
    if hashlib.sha256(payload).digest() != digest:
        raise CorruptEntry("the payload does not match its digest")
    try:
        return bounded_unpack(payload)  # bounded lengths, no ext types
    except ValueError as e:
        raise CorruptEntry(str(e)) from None


# The workers' preload record lives in the cache folder too, one per environment
# (``exportlens.core.isolation.speedups.preload_record``); ``cache clear`` forgets it with the rest.
PRELOAD_RECORD = re.compile(r"^preload-[0-9a-f]{16}\.msgpack$")


def preload_record_name(environment: str) -> str:
    """The preload record's file name for an environment (any text naming it)."""
    return f"preload-{hashlib.sha256(environment.encode()).hexdigest()[:16]}.msgpack"


def listed_libraries(manifest: dict[str, Any]) -> list[str] | None:
    """The libraries a manifest lists (none when it predates them); None when malformed."""
    libraries = manifest.get("libs", [])
    if not isinstance(libraries, list) or not all(isinstance(p, str) for p in libraries):
        return None
    return libraries
