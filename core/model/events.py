"""What a job reports while it runs, target by target: the targets it found, the one
it begins, the step it is at, the one it exported before lowering it and how far that
lowering came, the one it finished. Torch-free plain data.

The job (``core/export/job``) emits them; ``core/isolation/messages`` carries them to
the zygote as frames (each ``TAG`` names its frame) with the job's other messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Union

from exportlens.core.model.lowering import Lowering
from exportlens.core.model.results import Diagnostic, TargetDecl, TargetResult


@dataclass(frozen=True)
class TargetsFound:
    TAG: ClassVar[str] = "targets"
    targets: tuple[TargetDecl, ...]


@dataclass(frozen=True)
class TargetBegins:
    TAG: ClassVar[str] = "begin"
    target: str


@dataclass(frozen=True)
class Phase:
    """The job moved on to another step of the file or of ``target``: running the
    file, building the model, tracing, decompositions, lowering."""

    TAG: ClassVar[str] = "phase"
    target: str | None
    phase: str


@dataclass(frozen=True)
class TargetDone:
    TAG: ClassVar[str] = "done"
    target: TargetResult
    diagnostics: tuple[Diagnostic, ...] = ()


@dataclass(frozen=True)
class TargetExported:
    """``target`` exported, and lowering it comes next: its result and diagnostics are
    final now. A job that dies while lowering keeps them (``core/isolation/attempts``):
    lowering is a second question asked of a good export, and its failure never
    rewrites the first answer. Sent only when the request lowers."""

    TAG: ClassVar[str] = "exported"
    target: TargetResult
    diagnostics: tuple[Diagnostic, ...] = ()


@dataclass(frozen=True)
class LoweringState:
    """How far lowering ``target`` has come: a record per format begun, in order, the
    last one in progress; the findings so far; and ``pending``, the diagnostic for a
    job that dies in the step in progress: its message says what the step was doing
    ("while running the program in ExecuTorch's runtime..."), the worker puts the
    cause before it, and it stands where the step's size is decided (``decided``:
    at the ``Dim``s, else where the job was stopped, else at the target)."""

    TAG: ClassVar[str] = "lowering"
    target: str
    lowerings: tuple[Lowering, ...]
    diagnostics: tuple[Diagnostic, ...] = ()
    pending: Diagnostic | None = None
    decided: bool = False


JobEvent = Union[TargetsFound, TargetBegins, Phase, TargetExported, LoweringState, TargetDone]
