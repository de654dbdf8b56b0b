"""Calls whose Python frames never cross a boundary of the interpreter's frame stack.

Why: CPython (3.11 and later) keeps a thread's frames in a stack of chunks, 16 kB
each, and frees a chunk as soon as the frame at its base returns. A call tree that
goes up and down across a chunk's edge maps a chunk and unmaps it again at each
crossing: an ``mmap``, a page fault on fresh memory and an ``munmap``. Where the edge
falls depends on how deep the caller already is, so an export in a job may cross one
thousands of times where the same export called from a shallower frame crosses none
(CPython's gh-142183).

``call`` runs a function under a frame that asks for ``ROOM`` more stack than it uses:
the interpreter gives it a chunk of its own, twice that size, and every frame below
it lies in the same chunk until the calls go ~1 MB deep. The frame's unused stack is
never written, so it costs address space, not memory. Python before 3.11 allocates
each frame on its own; there this is an ordinary call. A CPython that keeps a freed
chunk per thread (3.14.4 on, and 3.13's backport) no longer thrashes without it:
there it gains nothing.

Measured, and when to remove it: docs/decisions/0006-frame-stack-chunk.md.
"""

from __future__ import annotations

from collections.abc import Callable
from types import FunctionType
from typing import TypeVar

T = TypeVar("T")

ROOM = 1 << 17  # stack slots (8 bytes each): a 2 MB chunk with ~1 MB left below this frame


def _plain(fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
    return fn(*args, **kwargs)


_roomy = FunctionType(_plain.__code__.replace(co_stacksize=ROOM), globals(), "_roomy")


def call(fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
    """``fn(*args, **kwargs)``, its frames in a chunk of their own."""
    return _roomy(fn, *args, **kwargs)  # type: ignore[no-any-return]
