"""What a job reports while it runs, target by target: the targets it found, the one
it begins, the step it is at, the one it finished. Torch-free plain data.

The job (``core/export/job``) emits them; ``core/isolation/messages`` carries them to
the zygote as frames (each ``TAG`` names its frame) with the job's other messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Union

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


JobEvent = Union[TargetsFound, TargetBegins, Phase, TargetDone]
