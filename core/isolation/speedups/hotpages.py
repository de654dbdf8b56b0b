"""Which of the zygote's pages an export writes, and paying their copy-on-write at once.

A job process is a fork of the zygote and shares its memory until it writes to it;
an export writes all over torch's heap (reference counts, caches), each page a fault
and a copy. The standby (``standby``) pays that ahead of its request.
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
spare) is not asked again for its next saves (``LESSON_PAUSE``). The list only
grows, up to ``MAX_PAGES``. Pages only: populating never changes what a process
computes, so a stale or partial list costs speed, never correctness. Where the kernel
cannot (no pagemap, no ``MADV_POPULATE_WRITE``), nothing is recorded and standbys warm
up by exporting as before.

``Learned`` holds what the zygote knows of them. Off with ``EXPORTLENS_HOT_PAGES=0``
(``switches``), and where the standby is off or there is no memfd to hand the pages
over (Linux has one): standbys then always warm up with a tiny export.

Measured, and when to switch it off: docs/decisions/0003-hot-pages.md.
"""

from __future__ import annotations

import bisect
import ctypes
import os
from array import array
from dataclasses import dataclass
from typing import Any

from exportlens.core.isolation import capabilities
from exportlens.core.isolation.capabilities import proc_open, proc_text
from exportlens.core.isolation.speedups import switches
from exportlens.core.trace import mark

PAGE = os.sysconf("SC_PAGE_SIZE")
MADV_POPULATE_WRITE = 23
PRESENT = 1 << 63
EXCLUSIVE = 1 << 56  # "page exclusively mapped" (Linux 4.2)
MAX_PAGES = 1 << 16  # 256 MB of 4 kB pages: more is not what an export writes
LEARN_FAULTS = 2000  # a job that copied more pages on write tells the zygote which ones
MAX_MAPPING = 1 << 32  # a larger mapping is a reservation, not a heap to read page by page

LESSON_PAUSE = 16  # saves of a file whose job had little to tell before it is asked again

Runs = list[tuple[int, int]]  # (address, bytes)


def _lacking() -> str | None:
    if switches.switched_off("EXPORTLENS_STANDBY") is not None:
        return "they warm the standby, which is off"
    if not hasattr(os, "memfd_create"):
        return "no memfd to hand the pages over (Linux's)"
    return None


STATE = switches.decide("EXPORTLENS_HOT_PAGES", _lacking(), gains="standbys warm by writing the pages an export writes, not by a tiny export")


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


@dataclass
class Learning:
    """What a standby read of its pages before it took its request, for its job to
    tell the zygote which ones it copied (``hotpages``)."""

    mappings: Runs
    before: list[array]
    fd: int  # the memfd the zygote reads the runs from
    faults: int  # ru_minflt then
    resident: int  # anonymous resident pages then (``anon_resident_pages``)


def teach(learning: Learning) -> None:
    """Write the runs of pages this job copied to the zygote's memfd, when it copied
    enough for that to be worth reading its pagemap again (``LEARN_FAULTS``).
    A copy is a fault that left the anonymous resident size as it was; a fault on
    fresh memory (the model's tensors, a new arena) adds an anonymous page, and
    populating could not spare it. (Faults on file mappings count as copies here: an
    over-count only costs the read, which then finds what was really copied.) What
    the read costs: docs/decisions/0003-hot-pages.md."""
    import resource  # there is a lesson only where there is ``resource`` (``Learned.learn_fd``)

    try:
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - learning.faults
        copies = faults - max(0, anon_resident_pages() - learning.resident)
        if copies <= LEARN_FAULTS:
            mark(f"job: ~{copies} copy-on-write faults of {faults}: nothing to teach")
        else:
            after = snapshot(learning.mappings)
            if after is not None:
                runs = written(learning.mappings, learning.before, after)
                os.pwrite(learning.fd, to_bytes(runs), 0)
                mark(f"job: {sum(size for _, size in runs) // PAGE} pages it copied noted (~{copies} copy-on-write faults of {faults})")
        os.close(learning.fd)
    except Exception:  # noqa: BLE001 - a lesson lost only costs speed
        pass


class Learned:
    """What the zygote knows of the pages an export writes: recorded by its first
    standby into ``record_fd``, read back once (``hot``: None until then, [] when
    unknown), and grown by the lessons of jobs since (``learn_from``)."""

    def __init__(self) -> None:
        self.hot: Runs | None = None
        self.record_fd = -1
        # Process -> the memfd its job tells the pages it copied in, and lessons read
        # back, added to ``hot`` when the next standby is forked.
        self.learning: dict[int, int] = {}
        self.lessons: list[bytes] = []
        # Which file each learning job runs, and how many pages the last job of a
        # file told of: a file whose job had little to tell is not asked again for
        # ``LESSON_PAUSE`` saves, as the read would cost its job time for nothing.
        self.teaching: dict[int, str] = {}
        self.taught: dict[str, int] = {}  # path -> pages its last job told of, or saves not asked since (negative)

    def record_fd_for_standby(self) -> int:
        """The memfd the next standby records its pages into, while none are known."""
        if self.hot is None and self.record_fd < 0:
            self.record_fd = os.memfd_create("exportlens-hot-pages")
        return self.record_fd if self.hot is None else -1

    def learn_fd(self) -> int:
        """A memfd for a standby's job to tell the pages it copied in, where faults are counted."""
        return os.memfd_create("exportlens-copied-pages") if capabilities.RESOURCE else -1

    def forked(self, pid: int, learn_fd: int) -> None:
        if learn_fd >= 0:
            self.learning[pid] = learn_fd

    def ask(self, pid: int, path: str) -> bool:
        """Whether the job of ``pid``, now given ``path``, should tell the pages it copied."""
        learn = pid in self.learning and self._worth_a_lesson(path)
        if learn:
            self.teaching[pid] = path
        return learn

    def _worth_a_lesson(self, path: str) -> bool:
        """Yes unless the file's last job told of fewer than ``LEARN_FAULTS`` (its pages
        are known, or what it faults on is fresh memory no list can spare); such a file
        is asked again after ``LESSON_PAUSE`` saves, in case its model grew."""
        last = self.taught.get(path)
        if last is None or last >= LEARN_FAULTS:
            return True
        self.taught[path] = -LESSON_PAUSE if last >= 0 else last + 1
        return self.taught[path] == 0

    def learn_from(self, pid: int) -> None:
        """A job process is over: keep what it told of the pages it copied, if anything."""
        fd = self.learning.pop(pid, None)
        path = self.teaching.pop(pid, None)
        if fd is None:
            return
        try:
            data = os.pread(fd, MAX_PAGES * 16, 0)
            if data:
                self.lessons.append(data)
            if path is not None:
                self.taught[path] = pages_in(data)
        except OSError:
            pass
        finally:
            os.close(fd)

    def read(self) -> Runs | None:
        """The pages to warm the next standby with: those a standby recorded, once it
        has, and those jobs told of since."""
        if self.hot and self.lessons:
            mappings = writable_mappings()
            for data in self.lessons:
                self.hot = merge(self.hot, from_bytes(data, mappings))
            self.lessons.clear()
            mark(f"zygote: {sum(size for _, size in self.hot) // PAGE} hot pages in {len(self.hot)} runs, with what jobs copied")
        if self.hot is not None or self.record_fd < 0:
            return self.hot
        size = os.fstat(self.record_fd).st_size
        if not size:
            return None
        data = os.pread(self.record_fd, min(size, MAX_PAGES * 16), 0)
        self.hot = from_bytes(data, writable_mappings())
        os.close(self.record_fd)
        self.record_fd = -1
        mark(f"zygote: {sum(size for _, size in self.hot) // PAGE} hot pages in {len(self.hot)} runs")
        return self.hot
