"""A file's state now, as the cache keys and the watchers compare it: the sha256 of a
regular file's bytes (its metadata for a large one), "absent" when nothing is there,
a library file's metadata (what the worker watches), a library unit's content (a
distribution's RECORD, a module's bytes) and the state of a module run from the
editor's unsaved text. Torch-free; reads, never blocks on a FIFO, never writes.

Nothing in a state names a machine for a key (``file_state`` of a small file and
``unit_state`` are content only); ``library_state`` and ``stat_state`` are metadata,
for watching on one machine, never part of a key.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import time
from typing import Callable, TypeVar

T = TypeVar("T")

# The state of a dependency that is not there (see ``file_state``).
ABSENT = "absent"


# A file at least this large (a checkpoint, a dataset the model opens for its header)
# is known by its metadata, not its bytes: hashing a 140 GB sparse checkpoint took
# three minutes of a 70B export, and every cache lookup would take as long again.
LARGE_FILE_BYTES = 32 << 20


def file_state(path: str) -> str | None:
    """A dependency's state now: the sha256 (hex) of a regular file's bytes (of its
    size, modification and change times, inode and device from ``LARGE_FILE_BYTES``
    on: any write changes its change time), ``ABSENT`` when nothing is there, None
    when it cannot be read (no permission, a folder, a FIFO or a device). Never
    blocks: a FIFO is opened non-blocking and not read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return ABSENT
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_size >= LARGE_FILE_BYTES:
            known = f"large\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\0{st.st_dev}"
            return hashlib.sha256(known.encode()).hexdigest()
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)


def library_state(path: str) -> str | None:
    """A library file's metadata now: its device, inode, size, and modification and
    change times (any write changes the change time). What the worker watches to see
    that a file it holds changed on disk -- a stat, not a read, every few seconds --
    never part of a key (``unit_state`` is). None when it is not there."""
    try:
        return stat_state(os.stat(path))
    except OSError:
        return None


def stat_state(st: os.stat_result) -> str:
    """``library_state`` of a file's ``os.stat``."""
    return f"{st.st_dev:x}:{st.st_ino:x}:{st.st_size:x}:{st.st_mtime_ns:x}:{st.st_ctime_ns:x}"


# A library's dependency is a *unit*: the RECORD file of an installed distribution
# (``<name>-<version>.dist-info/RECORD``: its lines hold the hash of every file the
# installer wrote, so one hash covers all its modules), or a module file that no
# RECORD lists (a folder on PYTHONPATH, an editable install, a namespace package).
RECORD_SUFFIX = ".dist-info" + os.sep + "RECORD"

# A file or folder whose modification or change time is this recent is "racily clean"
# (git's term): a write within the file system's timestamp granularity (a clock tick
# on older Linux kernels, 2 s on FAT) may leave its times as they were, so its state
# is not remembered by them until they are older than that.
RACY_NS = 2 * 10**9


def settled(*times_ns: int) -> bool:
    """Whether metadata with these times can vouch that the content has not changed
    since: every time at least ``RACY_NS`` in the past (a time in the future is not)."""
    now = time.time_ns()
    return all(t <= now - RACY_NS for t in times_ns)


# path -> (its metadata when its state was taken, that state): a unit is hashed again
# only when its metadata moved, so a lookup of an unchanged one costs a stat. A unit
# written in the last ``RACY_NS`` is not remembered: it is hashed at every lookup.
_unit_memo: dict[str, tuple[tuple[int, int, int, int, int], str]] = {}


def unit_state(path: str) -> str | None:
    """A library unit's state for the key, from its content only (the same on any
    machine with the same files): ``dist NAME VERSION sha256:HEX`` for a
    distribution's RECORD (name and version from the METADATA beside it),
    ``sha256:HEX`` of a module file's bytes. None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    seen = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    memo = _unit_memo.get(path)
    if memo is not None and memo[0] == seen:
        return memo[1]
    if path.endswith(RECORD_SUFFIX):
        state = _record_state(path)
    else:
        digest = _sha256(path)
        state = None if digest is None else "sha256:" + digest
    if state is not None and settled(st.st_mtime_ns, st.st_ctime_ns):
        _unit_memo[path] = (seen, state)
    return state


def _sha256(path: str) -> str | None:
    """A regular file's sha256, whatever its size (an extension module of a library
    on PYTHONPATH may be tens of MB: hashed once per process, then memoized). Never
    blocks (as ``file_state``)."""
    return _read_regular(path, lambda f: hashlib.file_digest(f, "sha256").hexdigest())


def _record_state(record: str) -> str | None:
    digest = _sha256(record)
    if digest is None:
        return None
    # Name and version from METADATA's headers. Its hash is in the RECORD already.
    fields = metadata_fields(os.path.dirname(record))
    if not fields.get("Name") or not fields.get("Version"):
        return None
    return f"dist {fields['Name']} {fields['Version']} sha256:{digest}"


def metadata_fields(dist_info: str) -> dict[str, str]:
    """The ``Name`` and ``Version`` headers of a ``.dist-info`` folder's METADATA (empty
    when it cannot be read). Read by hand, up to the blank line that ends the headers:
    importlib.metadata's email parser reads the whole description (torch's: ~1 ms)."""
    fields: dict[str, str] = {}
    try:
        with open(os.path.join(dist_info, "METADATA"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break  # the headers end: the description follows
                key, colon, value = line.partition(":")
                if colon and key in ("Name", "Version"):
                    fields.setdefault(key, value.strip())
    except OSError:
        return {}
    return fields


def dependency_bytes(path: str) -> bytes | None:
    """A dependency's bytes now, or None when it is not there or is not a readable
    regular file. Never blocks (as ``file_state``)."""
    return _read_regular(path, lambda f: f.read())


def _read_regular(path: str, read: Callable[[io.BufferedReader], T]) -> T | None:
    """``read`` of the file at ``path`` when it is a readable regular file, else None.
    Opened without blocking: a FIFO planted where a module was is not waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with open(fd, "rb", closefd=False) as f:
            return read(f) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except OSError:
        return None
    finally:
        os.close(fd)


def overlay_text_state(text: str) -> str:
    """The state of a module run from ``text`` (as ``core/export/loader`` records it)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
