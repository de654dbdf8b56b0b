"""The pages an export writes, recorded once and written in one go by later standbys
(``core/isolation/speedups/hotpages.py``): the recording finds exactly the pages a fork copied,
populating makes a fork's own copies before it writes, a garbled list is refused,
and through a real worker the next standby warms by hot pages and runs the request."""

from __future__ import annotations

import ctypes
import mmap
import os
import resource
import tempfile
import time
from pathlib import Path

import pytest

from exportlens.core import trace
from exportlens.core.isolation.pool import WorkerPool
from exportlens.core.isolation.speedups import fakecache, hotpages
from exportlens.core.isolation.startmethod import StartMethod
from tests.core.isolation.forks import in_child
from tests.core.isolation.models import add_model, request_for

pytestmark = pytest.mark.needs_speedup("hot pages")  # what it checks is that speed-up's (tests/conftest.py)

FORK = StartMethod("fork", "hot pages are what forks of the worker copy")  # whatever the session's start method

PAGES = 64


def _buffer() -> tuple[bytearray, int]:
    """A buffer and the first page boundary in it, followed by PAGES whole pages,
    each written (present) in this process."""
    raw = bytearray(hotpages.PAGE * (PAGES + 1))
    for i in range(0, len(raw), hotpages.PAGE):
        raw[i] = 1
    address = _address(raw)
    return raw, address + (-address % hotpages.PAGE)


def _address(raw: bytearray) -> int:
    return ctypes.addressof((ctypes.c_char * len(raw)).from_buffer(raw))


# Hot pages are read from /proc/self/pagemap and /proc/self/maps: Linux only.
HOT_PAGES_READ_FROM_PROC = pytest.mark.needs_proc("hot pages (read from /proc/self/pagemap)")


@HOT_PAGES_READ_FROM_PROC
def test_the_recording_is_the_pages_a_fork_copied() -> None:
    raw, start = _buffer()
    offset = start - _address(raw)
    written = [3, 4, 5, 40]

    def work() -> bytes:
        mappings = hotpages.writable_mappings()
        before = hotpages.snapshot(mappings)
        assert before is not None
        for page in written:
            raw[offset + page * hotpages.PAGE] = 2
        after = hotpages.snapshot(mappings)
        assert after is not None
        return hotpages.to_bytes(hotpages.written(mappings, before, after))

    runs = hotpages.from_bytes(in_child(work), hotpages.writable_mappings())
    ours = [(a, n) for a, n in runs if start <= a < start + PAGES * hotpages.PAGE]
    assert ours == [(start + 3 * hotpages.PAGE, 3 * hotpages.PAGE), (start + 40 * hotpages.PAGE, hotpages.PAGE)]


@HOT_PAGES_READ_FROM_PROC
def test_populating_copies_the_pages_before_any_write() -> None:
    raw, start = _buffer()
    run = [(start + 8 * hotpages.PAGE, 4 * hotpages.PAGE)]

    def work() -> bytes:
        mapping = [(start, PAGES * hotpages.PAGE)]
        before = hotpages.snapshot(mapping)
        assert hotpages.populate(run)
        after = hotpages.snapshot(mapping)
        assert before is not None and after is not None
        return hotpages.to_bytes(hotpages.written(mapping, before, after))

    assert hotpages.from_bytes(in_child(work), hotpages.writable_mappings()) == run
    assert raw.count(2) == 0  # populating changed no byte


@pytest.mark.parametrize(
    "data",
    [
        b"\x01" * 15,  # not whole (address, size) pairs
        hotpages.to_bytes([(hotpages.PAGE, hotpages.PAGE)]),  # page 1: not a mapping of ours
        hotpages.to_bytes([(0, 0)]),
    ],
)
def test_a_list_that_is_not_a_recording_is_refused(data: bytes) -> None:
    assert hotpages.from_bytes(data, hotpages.writable_mappings()) == []


MODEL = add_model()


def _warm_standbys(path: Path) -> list[str]:
    return [what for _, _, what in trace.read(str(path)) if what.startswith("standby: warm,")] if path.exists() else []


def _until_warm(log: Path, count: int, timeout: float = 120.0) -> None:
    """Wait until ``count`` standbys have said they are warm."""
    end = time.monotonic() + timeout
    while len(_warm_standbys(log)) < count:
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {count} warm standbys")
        time.sleep(0.05)


@HOT_PAGES_READ_FROM_PROC
def test_later_standbys_warm_by_hot_pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "trace"
    monkeypatch.setenv("EXPORTLENS_TRACE", str(log))  # the workers inherit it
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    with WorkerPool(1, start_method=FORK) as pool:
        pool.wait_ready()
        for i in range(2):
            # Each request once its standby is warm (the first records the pages).
            _until_warm(log, i + 1)
            (result,) = pool.run([request_for(model, i)])
            assert [t.status for t in result.targets] == ["ok"]
    warmed = _warm_standbys(log)
    assert warmed[0] == "standby: warm, by a tiny export"
    assert warmed[1] == "standby: warm, by hot pages"
    steps = [what for _, _, what in trace.read(str(log))]
    assert any(what.startswith("zygote: standby") and what.endswith("takes request 1") for what in steps)


def _next_taker(log: Path, after: str | None, timeout: float = 120.0) -> int:
    """The pid of the standby the next request will find, once the trace says
    ``after`` (the previous request let go) and that standby is warm."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        lines = [(pid, what) for _, pid, what in trace.read(str(log))]
        if after is None or after in {what for _, what in lines}:
            forked = [int(what.split()[2]) for _, what in lines if what.startswith("zygote: standby") and what.endswith("forked")]
            gone = {int(what.split()[2]) for _, what in lines if what.startswith("zygote: standby") and (what.endswith("dropped") or " takes request " in what)}
            alive = [pid for pid in forked if pid not in gone]
            if alive and any(p == alive[-1] and what.startswith("standby: warm,") for p, what in lines):
                return alive[-1]
        time.sleep(0.05)
    raise AssertionError("no warm standby")


SLICES = """
import time

import torch

time.sleep(0.3)  # a file that takes its time to run: the standby is not forked meanwhile


class Slices(torch.nn.Module):
    def forward(self, x):
        return torch.stack([x[: i + 1].sum() for i in range(48)]) * SCALE


model = Slices()
example_args = (torch.randn(64),)
"""


@HOT_PAGES_READ_FROM_PROC
def test_the_next_standby_is_forked_beside_the_job_unless_the_job_taught_the_worker_much(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once standbys warm by hot pages, the next one is forked while a job runs, so a
    save right after the result finds it warm -- once the job has run the file and
    begun its target, not while it starts. A job that sent many new fake-tensor
    cache entries (a new model, ``fakecache``) makes the worker fork it again after
    keeping them; one that sent a few (a changed constant) does not."""
    log = tmp_path / "trace"
    monkeypatch.setenv("EXPORTLENS_TRACE", str(log))  # the workers inherit it
    model = tmp_path / "model.py"
    with WorkerPool(1, start_method=FORK) as pool:
        pool.wait_ready()
        takers = []
        for i, scale in enumerate(("2.0", "2.0", "3.0", "3.0")):
            takers.append(_next_taker(log, f"zygote: request {i - 1} job let go after its result" if i else None))
            model.write_text(SLICES.replace("SCALE", scale) + f"\n_save = {i}\n")
            (result,) = pool.run([request_for(model, i)])
            assert [t.status for t in result.targets] == ["ok"]
    lines = [(pid, what) for _, pid, what in trace.read(str(log))]
    steps = [what for _, what in lines]

    def at(what: str) -> int:
        return steps.index(what)

    for i, pid in enumerate(takers):
        assert f"zygote: standby {pid} takes request {i}" in steps
    kept = [(n, int(what.split()[1])) for n, what in enumerate(steps) if what.endswith("fake-tensor cache entries kept")]
    assert len(kept) == 2
    (first, many), (second, few) = kept
    assert many >= fakecache.WORTH_A_NEW_STANDBY > few
    # The new model taught much: the second save runs in a process forked after that.
    assert at("zygote: request 0 result sent") < first < at(f"zygote: standby {takers[1]} forked")
    # The same model again taught nothing, the changed constant little: the next save
    # runs in the process forked beside the job.
    for i in (1, 2):
        assert at(f"zygote: request {i} in job {takers[i]}") < at(f"zygote: standby {takers[i + 1]} forked") < at(f"zygote: request {i} result sent")
        # The job's start -- its file run, its model built -- is over by then.
        assert lines.index((takers[i], "job: model file run")) < at(f"zygote: standby {takers[i + 1]} forked")
    assert at("zygote: request 2 result sent") < second


@HOT_PAGES_READ_FROM_PROC
def test_a_job_that_copied_many_pages_tells_which_and_the_worker_adds_them() -> None:
    """A tiny export does not write what a real model's does: a job taught by its
    standby's pagemap tells the zygote the pages it copied (``hotpages.teach``),
    which adds them to the list later standbys populate (``hotpages.Learned.read``). One
    that copied little tells nothing (it would cost the job ~7 ms for nothing)."""
    raw, start = _buffer()
    offset = start - _address(raw)

    def job(pages: list[int], threshold: int, read_file: bool = False) -> bytes:
        hotpages.LEARN_FAULTS = threshold  # in the fork only
        mappings = hotpages.writable_mappings()
        before = hotpages.snapshot(mappings)
        assert before is not None
        fd = os.memfd_create("lesson")
        learning = hotpages.Learning(mappings, before, os.dup(fd), resource.getrusage(resource.RUSAGE_SELF).ru_minflt, hotpages.anon_resident_pages())
        for page in pages:
            raw[offset + page * hotpages.PAGE] = 2
        if read_file:  # mapped until after the lesson, as a library's code stays
            with tempfile.NamedTemporaryFile(dir=Path(__file__).parent) as f:
                chunk = b"x" * (1 << 20)
                for _ in range(64):
                    f.write(chunk)
                f.flush()
                mapped = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
                sum(mapped[i] for i in range(0, len(mapped), hotpages.PAGE))
        hotpages.teach(learning)
        return os.pread(fd, 1 << 20, 0)

    # A fork of the test process copies pages of its own too: thresholds either side.
    assert in_child(lambda: job(list(range(10, 30)), 1 << 30)) == b""  # under the threshold
    # Code run for the first time in a fork maps many file pages a fault (fault-around,
    # large folios): a job that also read 64 MB of a file mapping still copied its 20
    # pages, and says so.
    assert _page_runs(in_child(lambda: job(list(range(10, 30)), 10, read_file=True)), start) == [(start + 10 * hotpages.PAGE, 20 * hotpages.PAGE)]
    lesson = in_child(lambda: job(list(range(10, 30)), 0))
    assert _page_runs(lesson, start) == [(start + 10 * hotpages.PAGE, 20 * hotpages.PAGE)]

    learned = hotpages.Learned()
    known = [(start + 28 * hotpages.PAGE, 8 * hotpages.PAGE), (start + 40 * hotpages.PAGE, 4 * hotpages.PAGE)]
    learned.hot, learned.lessons = list(known), [lesson]
    hot = learned.read()
    assert hot is not None
    ours = [(a, n) for a, n in hot if start <= a < start + PAGES * hotpages.PAGE]
    assert ours == [(start + 10 * hotpages.PAGE, 26 * hotpages.PAGE), (start + 40 * hotpages.PAGE, 4 * hotpages.PAGE)]  # 10-29 and 28-35 joined
    assert learned.lessons == []


def _page_runs(lesson: bytes, start: int) -> hotpages.Runs:
    """The runs of a job's lesson that lie in the test's buffer."""
    return [(a, n) for a, n in hotpages.from_bytes(lesson, hotpages.writable_mappings()) if start <= a < start + PAGES * hotpages.PAGE]


def test_merged_runs_stay_within_the_page_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    page = hotpages.PAGE
    assert hotpages.merge([(page, page)], [(3 * page, page), (2 * page, page)]) == [(page, 3 * page)]
    monkeypatch.setattr(hotpages, "MAX_PAGES", 2)
    assert hotpages.merge([(page, page)], [(3 * page, 2 * page)]) == [(page, page)]  # three pages: the old list


@HOT_PAGES_READ_FROM_PROC
def test_a_file_whose_job_had_little_to_tell_is_not_asked_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Telling the pages it copied costs a job a read of its pagemap (~7 ms). Once a
    job of a file told of few pages (its pages are known now), the next job of that
    file is not asked (``hotpages.Learned.ask``); another file's job is."""
    log = tmp_path / "trace"
    monkeypatch.setenv("EXPORTLENS_TRACE", str(log))  # the workers inherit it
    first, second = tmp_path / "first.py", tmp_path / "second.py"
    first.write_text(MODEL)
    second.write_text(MODEL.replace("x + 1", "x * 2"))
    files = [first] * 5 + [second]
    takers = []
    with WorkerPool(1, start_method=FORK) as pool:
        pool.wait_ready()
        for i, model in enumerate(files):
            takers.append(_next_taker(log, f"zygote: request {i - 1} job let go after its result" if i else None))
            (result,) = pool.run([request_for(model, i)])
            assert [t.status for t in result.targets] == ["ok"]
        # A job teaches after its result is out: the last one, before the worker exits.
        _next_taker(log, f"zygote: request {len(files) - 1} job let go after its result")
    lines = trace.read(str(log))

    def told(pid: int) -> list[str]:
        return [what for _, p, what in lines if p == pid and ("nothing to teach" in what or "pages it copied noted" in what)]

    def little(lesson: str) -> bool:
        return "nothing to teach" in lesson or int(lesson.split()[1]) < hotpages.LEARN_FAULTS

    assert _warm_standbys(log)[:2] == ["standby: warm, by a tiny export", "standby: warm, by hot pages"]
    assert told(takers[0]) == []  # warmed by a tiny export: nothing to compare with
    lessons = [told(pid) for pid in takers[1:5]]
    assert all(len(lesson) <= 1 for lesson in lessons), lessons
    # Asked until one had little to tell (what the first told is populated by the next standbys) ...
    k = next(i for i, lesson in enumerate(lessons) if lesson and little(lesson[0]))
    assert all(lesson and not little(lesson[0]) for lesson in lessons[:k]), lessons
    assert k < 3, lessons
    # ... then not asked again, while another file is.
    assert lessons[k + 1] == [], lessons
    assert len(told(takers[5])) == 1
