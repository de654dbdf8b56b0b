"""Which of the zygote's pages an export writes, and paying their copy-on-write at once.

A job process is a fork of the zygote and shares its memory until it writes to it;
an export writes all over torch's heap (reference counts, caches), each page a fault
and a copy. The standby (``forking``, ``standby``) pays that ahead of its request.
Writing the pages with one ``madvise(MADV_POPULATE_WRITE)`` per run of pages (Linux
5.14) makes the kernel copy them without a fault each, in a fraction of the time of
the tiny export a standby would otherwise warm with.

Which pages: the first standby records them. It reads its ``/proc/self/pagemap``
before and after its warm-up export; a page present and shared with the zygote before
and present and exclusively its own after was copied on write. It hands the runs of
such pages to the zygote (a memfd only that standby holds); later standbys populate
them instead of exporting. A tiny export does not write what a real model's does
(transformers' modules, a BERT's operators and cache entries), so jobs teach it the
rest: a standby that warmed by hot pages reads its pagemap before it takes a request,
and its job, when it copied more than ``LEARN_FAULTS`` pages (faults that added no
anonymous resident page), reads it again after it sent its result
(``jobprocess._lessons``) and hands the pages it copied to the zygote, which adds
them to the list (``merge``) for the standbys forked after. A file whose job had
little to tell (its pages known, or its faults on fresh memory that no list can
spare) is not asked again for its next saves (``forking.LESSON_PAUSE``). The list only
grows, up to ``MAX_PAGES``. Pages only: populating never changes what a process
computes, so a stale or partial list costs speed, never correctness. Where the kernel
cannot (no pagemap, no ``MADV_POPULATE_WRITE``), nothing is recorded and standbys warm
up by exporting as before.

Measured, and when to switch it off (``EXPORTLENS_HOT_PAGES=0``): docs/decisions/0003-hot-pages.md.
"""

from __future__ import annotations

import bisect
import ctypes
import os
from array import array
from typing import Any

from exportlens.core.isolation.capabilities import proc_open, proc_text

PAGE = os.sysconf("SC_PAGE_SIZE")
MADV_POPULATE_WRITE = 23
PRESENT = 1 << 63
EXCLUSIVE = 1 << 56  # "page exclusively mapped" (Linux 4.2)
MAX_PAGES = 1 << 16  # 256 MB of 4 kB pages: more is not what an export writes
LEARN_FAULTS = 2000  # a job that copied more pages on write tells the zygote which ones
MAX_MAPPING = 1 << 32  # a larger mapping is a reservation, not a heap to read page by page

Runs = list[tuple[int, int]]  # (address, bytes)


def anon_resident_pages() -> int:
    """This process's resident anonymous pages now (``RssAnon``; 0 when the kernel
    does not say): what a fault on fresh memory adds to and a copy on write leaves as
    it was. Not the whole resident size: a fault on a file mapping (torch's code run
    for the first time in this fork) maps many pages at once (fault-around, large
    folios), which hid every copy (docs/decisions/0003-hot-pages.md)."""
    try:
        with proc_open("self/status") as f:
            for line in f:
                if line.startswith(b"RssAnon:"):
                    return int(line.split()[1]) * 1024 // PAGE
    except (OSError, ValueError, IndexError):
        pass
    return 0


def writable_mappings() -> Runs:
    """This process's private writable mappings, as (address, bytes)."""
    out: Runs = []
    try:
        with proc_text("self/maps") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 1 and fields[1].startswith("rw") and fields[1].endswith("p"):
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    if end - start <= MAX_MAPPING:
                        out.append((start, end - start))
    except OSError:
        return []
    return out


def snapshot(mappings: Runs) -> list[array] | None:
    """Each mapping's pagemap entries now; None when the kernel does not say."""
    out = []
    try:
        with proc_open("self/pagemap", buffering=0) as f:
            for start, size in mappings:
                f.seek(start // PAGE * 8)
                entries = array("Q")
                entries.frombytes(f.read(size // PAGE * 8))
                out.append(entries)
    except (OSError, ValueError):
        return None
    return out


def written(mappings: Runs, before: list[array], after: list[array]) -> Runs:
    """Runs of pages shared with the parent in ``before`` and copied in ``after``."""
    try:
        import numpy
    except ImportError:  # pure Python: many times numpy's time (docs/decisions/0003-hot-pages.md)
        return _written(mappings, before, after)
    return _written_numpy(numpy, mappings, before, after)


def _written_numpy(np: Any, mappings: Runs, before: list[array], after: list[array]) -> Runs:
    """``written``, a whole mapping at a time (a job pays it, see ``LEARN_FAULTS``)."""
    mask, present = np.uint64(PRESENT | EXCLUSIVE), np.uint64(PRESENT)
    runs: Runs = []
    total = 0
    for (start, _), old, new in zip(mappings, before, after, strict=True):
        o, n = np.frombuffer(old, dtype=np.uint64), np.frombuffer(new, dtype=np.uint64)
        copied = ((o & mask) == present) & ((n & mask) == mask)
        edges = np.flatnonzero(np.diff(np.concatenate(([False], copied, [False])).astype(np.int8)))
        for first, end in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
            runs.append((start + first * PAGE, (end - first) * PAGE))
            total += end - first
        if total > MAX_PAGES:
            return []
    return runs


def _written(mappings: Runs, before: list[array], after: list[array]) -> Runs:
    runs: Runs = []
    total = 0
    for (start, _), old, new in zip(mappings, before, after, strict=True):
        first = -1
        for i, (o, n) in enumerate(zip(old, new, strict=True)):
            copied = o & (PRESENT | EXCLUSIVE) == PRESENT and n & (PRESENT | EXCLUSIVE) == PRESENT | EXCLUSIVE
            if copied and first < 0:
                first = i
            elif not copied and first >= 0:
                runs.append((start + first * PAGE, (i - first) * PAGE))
                total += i - first
                first = -1
        if first >= 0:
            runs.append((start + first * PAGE, (len(new) - first) * PAGE))
            total += len(new) - first
        if total > MAX_PAGES:
            return []
    return runs


def merge(old: Runs, new: Runs) -> Runs:
    """The pages of both, in coalesced runs by address; ``old`` itself when together
    they hold more than ``MAX_PAGES``."""
    out: Runs = []
    for address, size in sorted(old + new):
        if out and address <= out[-1][0] + out[-1][1]:
            last, last_size = out[-1]
            out[-1] = (last, max(last_size, address + size - last))
        else:
            out.append((address, size))
    return out if sum(size for _, size in out) // PAGE <= MAX_PAGES else old


def to_bytes(runs: Runs) -> bytes:
    return array("Q", [x for run in runs for x in run]).tobytes()


def pages_in(data: bytes) -> int:
    """How many pages the runs in ``data`` (``to_bytes``) cover; 0 for anything else."""
    if not data or len(data) % 16:
        return 0
    values = array("Q")
    values.frombytes(data)
    return sum(values[1::2]) // PAGE


def from_bytes(data: bytes, mappings: Runs) -> Runs:
    """Runs read back, keeping only whole runs inside ``mappings`` (the zygote's own)
    and at most ``MAX_PAGES`` pages: anything else is not a list a standby wrote."""
    if len(data) % 16:
        return []
    values = array("Q")
    values.frombytes(data)
    ordered = sorted(mappings)
    starts = [start for start, _ in ordered]
    runs: Runs = []
    total = 0
    for address, size in zip(values[::2], values[1::2], strict=True):
        at = bisect.bisect_right(starts, address) - 1
        inside = at >= 0 and address + size <= ordered[at][0] + ordered[at][1]
        if not inside or not size or size % PAGE or address % PAGE:
            return []
        total += size // PAGE
        runs.append((address, size))
    return runs if total <= MAX_PAGES else []


def populate(runs: Runs) -> bool:
    """Write-fault every page of ``runs`` now; False when the kernel cannot."""
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return False
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for address, size in runs:
        if madvise(address, size, MADV_POPULATE_WRITE) != 0 and ctypes.get_errno() == 22:  # EINVAL: not supported
            return False
        # Other errors (the range unmapped since): that run is skipped.
    return True
