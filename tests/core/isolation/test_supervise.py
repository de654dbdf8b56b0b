"""Supervising one job process, with a real child process but no worker and no torch:
which limit a job that passed both is stopped for."""

from __future__ import annotations

import os
import signal
from typing import Iterator

import pytest

from exportlens.core.isolation.forking import Job
from exportlens.core.isolation.messages import ExportRequest, FromWorker, Limits
from exportlens.core.isolation.pipes import Tail
from exportlens.core.isolation.supervise import Attempt, supervise

HOARD_MB = 256


class Quiet:
    """A worker whose pool says nothing while the job runs."""

    def __init__(self) -> None:
        self.fin, self._w = os.pipe()

    def read_input(self) -> None:
        raise AssertionError("nothing was written")

    def send(self, message: FromWorker) -> None:
        pass

    @property
    def stop_requested(self) -> bool:
        return False


def rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
def hoarder() -> Iterator[Job]:
    """A child that holds HOARD_MB of touched memory and then idles, as a job process."""
    ready_r, ready_w = os.pipe()
    events_r, events_w = os.pipe()
    output_r, output_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            hoard = bytearray(HOARD_MB << 20)  # zero-filled: every page written
            os.write(ready_w, b"x")
            signal.pause()
            del hoard
        finally:
            os._exit(0)
    for fd in (ready_w, events_w, output_w):
        os.close(fd)
    assert os.read(ready_r, 1) == b"x"
    os.close(ready_r)
    for fd in (events_r, output_r):
        os.set_blocking(fd, False)
    job = Job(pid, events_r, output_r, os.memfd_create("test-dump"))
    yield job
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    for fd in (events_r, output_r, job.dump_fd):
        os.close(fd)


def test_a_job_over_its_memory_cap_when_its_time_is_up_is_out_of_memory(hoarder: Job) -> None:
    # However slowly a hoarding job runs, it is stopped for its memory once it holds
    # too much, even if its time ran out in the same moment (here: before the first look).
    cap = rss_mb(hoarder.pid) - HOARD_MB // 2
    request = ExportRequest(1, "/p/model.py", limits=Limits(timeout_s=1e-9, memory_mb=cap))
    attempt = Attempt()
    supervise(Quiet(), hoarder, request, attempt, Tail())
    assert attempt.failure == "out-of-memory"
