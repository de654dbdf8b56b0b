"""A job process forked before its request arrives (``standby_main``): it warms up
(by hot pages, else a tiny export, ``warmup``) while the user is still typing, then
runs the request it is handed as any job does (``jobprocess.child_main``).

Measured, and when to switch it off (``EXPORTLENS_STANDBY=0``):
docs/decisions/0002-standby-job.md.
"""

from __future__ import annotations

import os
from typing import NoReturn

from exportlens.core.isolation import hotpages
from exportlens.core.isolation.jobprocess import Learning, child_main
from exportlens.core.isolation.messages import (
    Export,
    StandbyWarm,
    read_frame,
    write_frame,
)
from exportlens.core.isolation.warmup import prewarm
from exportlens.core.model.request import ExportRequest
from exportlens.core.trace import mark


def standby_main(
    request_fd: int,
    events_fd: int,
    output_fd: int,
    dump_fd: int,
    num_threads: int,
    hot: hotpages.Runs | None = None,
    record_fd: int = -1,
    learn_fd: int = -1,
) -> NoReturn:
    """A job process forked *before* its request arrives. Never returns.

    A fresh fork pays copy-on-write for every page it writes, and an export writes
    all over torch's operator tables (``run_decompositions`` walks every op). The
    standby pays that while the user is still typing, then blocks until the worker
    hands it a request (or closes the pipe: exit). A request that comes while it is
    still warming up goes to a fresh fork instead (or, when it writes hot pages, to
    it, once warm within ``forking.POPULATE_WAIT_S``), so warming never delays an
    export by much.

    With ``hot`` (the pages an export writes, ``hotpages``) it writes those pages in
    one go, a fraction of the time of a tiny export; without, it runs the tiny export,
    and with ``record_fd`` records which pages that wrote, for the next standbys.
    With ``learn_fd``, warmed by hot pages, it reads its pages before it takes a
    request, for its job to tell which ones it copied (``hotpages``).
    """
    mark("standby: warming")
    how = "hot pages"
    if not (hot and hotpages.populate(hot)):
        how = "a tiny export"
        mappings = hotpages.writable_mappings() if record_fd >= 0 else []
        before = hotpages.snapshot(mappings) if mappings else None
        try:
            prewarm()
        except BaseException:  # noqa: BLE001 - a failed warm-up only costs speed
            pass
        after = hotpages.snapshot(mappings) if before is not None else None
        if before is not None and after is not None:
            try:
                os.pwrite(record_fd, hotpages.to_bytes(hotpages.written(mappings, before, after)), 0)
            except OSError:
                pass
    if record_fd >= 0:
        os.close(record_fd)
    learning = None
    if learn_fd >= 0:
        mappings = hotpages.writable_mappings() if how == "hot pages" else []
        before = hotpages.snapshot(mappings) if mappings else None
        if before is None:
            os.close(learn_fd)
        else:
            import resource  # a lesson is asked for only where there is ``resource`` (``Forker.spawn_standby``)

            learning = Learning(mappings, before, learn_fd, resource.getrusage(resource.RUSAGE_SELF).ru_minflt, hotpages.anon_resident_pages())
    mark(f"standby: warm, by {how}")
    write_frame(events_fd, StandbyWarm())  # warm: the worker may hand it a request
    request: ExportRequest | None = None
    try:
        message = read_frame(request_fd)
        if isinstance(message, Export):
            request = message.request
            if learning is not None and not message.learn:  # the file's last job had little to tell
                os.close(learning.fd)
                learning = None
    except BaseException:  # noqa: BLE001 - garbage on our own pipe: exit quietly
        pass
    os.close(request_fd)
    if request is None:
        os._exit(0)
    child_main(request, events_fd, output_fd, dump_fd, num_threads, learning)
    os._exit(70)  # not reached: child_main exits
