"""What one export is asked for: the request and its limits. Torch-free plain data.

Read by every side of a run: the pipeline builds it, the cache keys it, the pool
sends it to a worker (``core/isolation/messages`` encodes it), the job runs it. The
defaults of the limits live here, with the limits; ``core/project/settings`` names
them for ``[tool.exportlens]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_TIMEOUT_S = 120.0  # seconds per target: the wall clock less the wait for a CPU (isolation.jobclock)
DEFAULT_MEMORY_MB = 8192  # resident memory cap of one export job


@dataclass(frozen=True)
class Limits:
    timeout_s: float = DEFAULT_TIMEOUT_S  # per target, wall clock
    memory_mb: int = DEFAULT_MEMORY_MB  # resident set of the job process


@dataclass(frozen=True)
class Trial:
    """One fix to verify: the user's files as the fix leaves them. The job exports
    ``target`` from these texts and compares its program's outputs with the model's
    own, made from the request's texts (``core/export/verify``)."""

    id: int
    target: str
    texts: tuple[tuple[str, str], ...]  # (real path, text after the fix), the files it edits
    code: str  # the diagnostic the fix is for: gone once the target exports without it
    path: str | None = None  # the diagnostic's file, when not the request's
    # Several diagnostics' fixes tried together: every one of these codes must be gone.
    codes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExportRequest:
    id: int
    path: str  # absolute path of the model file
    source: str | None = None  # the editor's unsaved text; None reads the file
    root: str | None = None  # project root: pyproject.toml lookup, sys.path
    limits: Limits = field(default_factory=Limits)
    strict_default: bool = False
    skip: tuple[str, ...] = ()  # target names not to export again (after a crash)
    pyproject_targets: tuple[str, ...] = ()  # "path.py:function" entries
    lower: tuple[str, ...] = ()  # formats to lower each exported target to ("onnx"); () none
    keep_lowered: tuple[str, ...] = ()  # formats whose lowered program's bytes ride in the result (``--save-onnx``, ``--save-pte``)
    weights: str = "auto"  # "auto": large tensors built fake where values are not needed; "real"
    # The most memory a lowered program may need to run, in bytes (``memory_budget``;
    # a target's own budget wins); None: no budget.
    memory_budget: int | None = None
    why_real: str = ""  # a run the worker repeats with real weights: why (``core/export/weights``)
    # (real path, text) of the project's local modules open in the editor with unsaved
    # text: the job imports each from its text, not from the disk (``core/export/loader``).
    overlays: tuple[tuple[str, str], ...] = ()
    # Fixes to verify instead of an export (``core/fixes/verified``): the result carries a
    # ``Verdict`` for each, nothing else; never looked up in or stored to the cache.
    trials: tuple[Trial, ...] = ()
