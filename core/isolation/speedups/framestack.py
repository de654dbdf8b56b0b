"""Calls whose Python frames never cross a boundary of the interpreter's frame stack.

Why: CPython 3.11 and 3.12, 3.13 before 3.13.13 and 3.14 before 3.14.4 keep a
thread's frames in a stack of chunks, 16 kB each, and free a chunk as soon as the
frame at its base returns (gh-142183). A call tree that goes up and down across a
chunk's edge maps a chunk and unmaps it again at each crossing: an ``mmap``, a page
fault on fresh memory and an ``munmap``. Where the edge falls depends on how deep the
caller already is, so an export in a job may cross one thousands of times where the
same export called from a shallower frame crosses none.

``call`` runs a function under a frame that asks for ``ROOM`` more stack than it uses:
the interpreter gives it a chunk of its own, twice that size, and every frame below
it lies in the same chunk until the calls go ~1 MB deep. The frame's unused stack is
never written, so it costs address space, not memory.

It does so only where the thrashing exists (``state``). Python before 3.11 allocates
each frame on its own. CPython 3.13.13 and 3.14.4 keep the last freed chunk for the
thread's next crossing (python/cpython#146123 and its 3.14 twin), and so does 3.15.
Where ``resource`` counts page faults, a probe of ~2 ms measures it, once per process;
elsewhere the version decides. ``exportlens version`` says which and why.

Measured, and when to remove it: docs/decisions/0006-frame-stack-chunk.md.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import FunctionType
from typing import TypeVar

from exportlens.core.isolation import capabilities
from exportlens.core.isolation.speedups import switches
from exportlens.core.isolation.speedups.switches import State

T = TypeVar("T")

SWITCH = "EXPORTLENS_FRAME_STACK"
ROOM = 1 << 17  # stack slots (8 bytes each): a 2 MB chunk with ~1 MB left below this frame
FIXED = {(3, 13): (3, 13, 13), (3, 14): (3, 14, 4)}  # the first release of a minor with gh-142183's chunk cache
PROBE_DEPTH = 400  # frames of ~100 bytes: more than two 16 kB chunks
PROBE_REPS = 6  # crossings per depth: a thrashing interpreter faults on every one


def thrashes_by_version(version: tuple[int, ...]) -> bool:
    """Whether a CPython of ``version`` maps and unmaps a chunk at each crossing."""
    major_minor = tuple(version[:2])
    if major_minor < (3, 11):
        return False
    if major_minor in FIXED:
        return tuple(version[:3]) < FIXED[major_minor]
    return major_minor < (3, 13)


def decide(version: tuple[int, ...], measured: bool | None) -> State:
    """Whether ``call`` gives its function a chunk of its own, and why: ``measured``
    is the probe's finding, None where it could not run."""
    shown = ".".join(map(str, version[:3]))
    if tuple(version[:2]) < (3, 11):
        return State(False, f"off: Python {shown} allocates each frame on its own")
    if measured is not None:
        if measured:
            return State(True, f"on: Python {shown} maps and unmaps a frame-stack chunk at each crossing of its edge (measured), so the workers' frames get one of their own ($EXPORTLENS_FRAME_STACK=0 turns it off)")
        return State(False, f"off: Python {shown} keeps a freed frame-stack chunk for the next crossing (measured)")
    if thrashes_by_version(version):
        return State(True, f"on: Python {shown} maps and unmaps a frame-stack chunk at each crossing of its edge (gh-142183, by its version), so the workers' frames get one of their own ($EXPORTLENS_FRAME_STACK=0 turns it off)")
    return State(False, f"off: Python {shown} keeps a freed frame-stack chunk for the next crossing (gh-142183, by its version)")


def _leaf(n: int) -> int:
    return _leaf(n - 1) if n else 0


def _worst_faults(n: int, faults: Callable[[], int]) -> int:
    """The most page faults ``PROBE_REPS`` shallow call trees took at any of ``n`` depths below here."""
    before = faults()
    for _ in range(PROBE_REPS):
        _leaf(8)
    worst = faults() - before
    return max(worst, _worst_faults(n - 1, faults)) if n else worst


def probe() -> bool | None:
    """Whether this interpreter faults on every crossing of a chunk's edge, measured:
    None where ``resource`` does not count page faults."""
    if not capabilities.RESOURCE or sys.implementation.name != "cpython":
        return None
    import resource  # only where there is ``resource`` (``capabilities``): not on Windows

    who = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)
    return _worst_faults(PROBE_DEPTH, lambda: resource.getrusage(who).ru_minflt) >= PROBE_REPS


@functools.cache
def state() -> State:
    """Whether ``call`` gives its function a chunk of its own here, decided once per process."""
    off = switches.switched_off(SWITCH)
    if off is not None:
        return State(False, off)
    if sys.implementation.name != "cpython":
        return State(False, f"off: {sys.implementation.name} has no CPython frame stack")
    return decide(sys.version_info[:3], probe())


def _plain(fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
    return fn(*args, **kwargs)


_roomy = FunctionType(_plain.__code__.replace(co_stacksize=ROOM), globals(), "_roomy")


def call(fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
    """``fn(*args, **kwargs)``, its frames in a chunk of their own where that matters (``state``)."""
    if not state().on:
        return fn(*args, **kwargs)
    return _roomy(fn, *args, **kwargs)  # type: ignore[no-any-return]
