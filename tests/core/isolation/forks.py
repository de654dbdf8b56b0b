"""Running a piece of a test in a fork of the test process, as the worker forks jobs."""

from __future__ import annotations

import os
import pickle
from typing import Callable, TypeVar

T = TypeVar("T")


def in_child(work: Callable[[], T]) -> T:
    """``work()`` run in a fork of this process (whose memory and caches it may
    change); its value, which the fork pickles back. A fork that raised fails the test."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            os.write(w, pickle.dumps(work()))
        except BaseException:  # noqa: BLE001 - reported as the exit code
            code = 1
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    value: T = pickle.loads(data)
    return value
