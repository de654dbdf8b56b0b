"""What a forked job process keeps of the worker's descriptors (``forking.close_all_but``).

The worker's own pipes, memfds and its waiter's epoll are closed in the job: a model
must never write into the frame stream, nor keep a pipe of the worker's open. A file a
library the worker imported holds (a log, a database, ``/dev/urandom``) stays open, as
it was before the worker's descriptors were closed wholesale: closed, its number would
be the job's next ``open``, and the library's object would write into that file."""

from __future__ import annotations

import json
import os
import select
from pathlib import Path
from typing import Callable

import pytest

from exportlens.core.isolation.forking import Forker, close_all_but, close_job
from exportlens.core.isolation.pipes import Tail

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(os, "memfd_create"), reason="forks and memfds (Linux)")


def _in_fork(report: Callable[[int], dict[str, object]], keep: tuple[int, ...] = ()) -> dict[str, object]:
    """Run ``report(events_w)`` in a job process forked as the worker forks one; what it returned."""

    def child(events_w: int, output_w: int, dump_fd: int) -> None:
        try:
            data = json.dumps(report(events_w)).encode()
        except BaseException as e:  # noqa: BLE001 - the test says what broke
            data = json.dumps({"error": repr(e)}).encode()
        os.write(events_w, data)
        os._exit(0)

    job = Forker().fork(child, keep=keep)
    os.set_blocking(job.events_r, True)
    chunks = []
    while chunk := os.read(job.events_r, 65536):
        chunks.append(chunk)
    os.waitpid(job.pid, 0)
    close_job(job, Tail())
    return json.loads(b"".join(chunks))  # type: ignore[no-any-return]


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_a_library_file_stays_the_same_file_in_the_job(tmp_path: Path) -> None:
    log = tmp_path / "library.log"
    held = open(log, "a")  # noqa: SIM115 - what a library the worker imported keeps open
    try:
        inode = os.fstat(held.fileno()).st_ino

        def report(events_w: int) -> dict[str, object]:
            fresh = os.open(tmp_path / "model-output", os.O_WRONLY | os.O_CREAT, 0o600)  # the job's own open
            held.write("from the job\n")
            held.flush()
            return {"open": _is_open(held.fileno()), "same": _is_open(held.fileno()) and os.fstat(held.fileno()).st_ino == inode, "fresh": fresh}

        seen = _in_fork(report)
        assert seen.get("open") and seen.get("same"), seen
        assert seen["fresh"] != held.fileno()
        assert (tmp_path / "model-output").read_text() == ""  # the library's line went to its own file
        assert log.read_text() == "from the job\n"
    finally:
        held.close()


def test_the_workers_pipes_memfds_and_epoll_are_closed_in_the_job() -> None:
    r, w = os.pipe()
    memfd = os.memfd_create("worker-own")
    poller = select.epoll() if hasattr(select, "epoll") else None
    kept_r, kept_w = os.pipe()
    try:
        mine = {"pipe_r": r, "pipe_w": w, "memfd": memfd, **({"epoll": poller.fileno()} if poller else {})}
        seen = _in_fork(lambda events_w: {"closed": {name: not _is_open(fd) for name, fd in mine.items()}, "kept": _is_open(kept_r)}, keep=(kept_r, -1))
        assert seen.get("closed") == dict.fromkeys(mine, True), seen
        assert seen["kept"] is True
    finally:
        for fd in (r, w, memfd, kept_r, kept_w):
            os.close(fd)
        if poller:
            poller.close()


def test_keeping_stdio_or_minus_one_closes_what_is_not_kept() -> None:
    r, w = os.pipe()
    try:

        def report(events_w: int) -> dict[str, object]:
            close_all_but((-1, 0, 2, events_w))
            return {"pipe": _is_open(r) or _is_open(w), "stdio": [_is_open(fd) for fd in (0, 1, 2)]}

        seen = _in_fork(report, keep=(r, w))  # open until the call above
        assert seen == {"pipe": False, "stdio": [True, True, True]}, seen
    finally:
        os.close(r)
        os.close(w)
