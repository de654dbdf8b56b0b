"""The record ``@exportlens.target`` writes and the job reads. Torch-free.

It lives in core, not beside the decorator, so that the job process (core) reads it
without importing the ``exportlens`` package above core. User code reaches it only
through ``exportlens.target``; both see the same list because a module is imported
once per process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Set on each decorated object, so a tool can tell a target from its attribute alone.
ATTRIBUTE = "__exportlens_target__"


@dataclass(frozen=True)
class TargetOptions:
    example_args: Any = None
    example_kwargs: Any = None
    dynamic_shapes: Any = None
    strict: bool = False
    name: str | None = None
    memory_budget: Any = None  # "512 MB" or bytes: the most memory its lowered program may need


# Every decorated object, in definition order: (object, options). The job clears it
# before running a file and then filters it by the module it just ran.
REGISTRY: list[tuple[Any, TargetOptions]] = []
