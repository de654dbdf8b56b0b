"""The one interface every lowering destination implements, and the run they share.

A destination (``onnx``, ``executorch``) knows how to *lower* an exported program to
its format, with its own findings on the way, and how to *run* what it lowered; what
happens around that is the same for all and lives here: the missing extra said once
per job, the eager outputs, the comparison and its mismatch diagnostics
(``outputs``), the status and the time. So a third destination is one module with
two functions, and none re-implements "does it run the same". Runs in the job process.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import logging
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from exportlens.core import torchversion
from exportlens.core.export.loader import Loaded
from exportlens.core.export.lowering import fx_nodes
from exportlens.core.export.lowering.outputs import compare_outputs, eager_outputs, mismatch_diagnostics, user_outputs
from exportlens.core.export.lowering.randomness import describe, drawn_lines, placed, random_outputs
from exportlens.core.export.targets import Built, Candidate
from exportlens.core.model.lowering import Lowering, LoweringStatus
from exportlens.core.model.results import Diagnostic, Related
from exportlens.core.model.signature import Signature, SourceLine
from exportlens.core.source.project import UserSources


@dataclass(frozen=True)
class Subject:
    """What is lowered: one exported target, as the job holds it."""

    ep: Any  # the ExportedProgram, after run_decompositions({})
    built: Built
    candidate: Candidate
    loaded: Loaded
    sources: UserSources
    signature: Signature | None
    keep: bool = False  # carry the lowered program's bytes in the record (``--save-onnx``, ``--save-pte``)
    # The layers found in training mode that compute otherwise in eval mode, as
    # ``training.check`` names them ("`BatchNorm2d` `main.1` (dcgan.py:8)"), or "".
    training: str = ""
    memory_mb: int | None = None  # the job's memory cap (``Limits.memory_mb``)
    budget: int | None = None  # the most memory the lowered program may need, bytes (``memory_budget``)
    # Hears how far lowering came before a step that may kill the job: the record so
    # far, its findings, the diagnostic for a death in that step, whether it stands
    # where the step's size is decided (``lowering.State``, one format's).
    report: Callable[[Lowering, list[Diagnostic], Diagnostic | None, bool], None] | None = None

    @property
    def name(self) -> str:
        return self.candidate.decl.name

    def line_of(self, node: Any) -> SourceLine | None:
        return fx_nodes.node_line(node, self.sources)


@dataclass
class Lowered:
    """What ``Destination.lower`` made: the record so far, its findings, and the
    program to run -- None when there is nothing to run (it failed, or running was
    skipped, and ``record`` says why)."""

    record: Lowering
    found: list[Diagnostic] = field(default_factory=list)
    program: Any = None
    output_names: tuple[str, ...] = ()  # the program's outputs, in the order ``run`` returns them
    # What running it will need, where that is decided (``memory``): said if the run
    # kills the job. ``(what it needs, where, related, at the Dims)``; None: nothing known.
    needs: tuple[str, SourceLine, tuple[Related, ...], bool] | None = None


class Stop(Exception):
    """A run that ends with its own findings (a kernel the runtime lacks), not a bare error."""

    def __init__(self, status: LoweringStatus, found: list[Diagnostic], errors: tuple[str, ...] = ()) -> None:
        super().__init__(status)
        self.status = status
        self.found = found
        self.errors = errors  # for the record: one short line each


class Destination(Protocol):
    format: str  # one of LOWER_FORMATS; its codes are ``lowering/<format>-*``
    title: str  # the format as people write it: "ONNX"
    runtime: str  # what runs the lowered program, as messages name it: "onnxruntime"
    product: str  # what lowering makes, as messages name it: "converted model"
    packages: tuple[str, ...]  # what must import (the extra)
    install: str  # the command that installs them

    def lower(self, subject: Subject, versions: str) -> Lowered: ...

    def run(self, lowered: Lowered, subject: Subject) -> list[Any]:
        """The program's outputs on copies of the example inputs; raises ``Stop``, or
        anything else for a plain failure."""
        ...


# The job process is one per file: a missing extra is said once, not once per target.
_missing_said: set[str] = set()


def missing_packages(packages: tuple[str, ...]) -> list[str]:
    """The packages that do not import (a broken install counts)."""
    missing = []
    for package in packages:
        try:
            importlib.import_module(package)
        except ImportError:
            missing.append(package)
    return missing


def _version(package: str) -> str:
    """The installed distribution's version (``executorch`` has no ``__version__``)."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return str(getattr(importlib.import_module(package), "__version__", "?"))


def lower_to(destination: Destination, subject: Subject) -> tuple[Lowering, list[Diagnostic]]:
    """Lower, run, compare: the record and every finding of one destination. Lowering
    and the run happen under ``torch.no_grad()``, as the destinations' own export
    scripts do (ExecuTorch's passes change state in place, which autograd refuses on
    a buffer it tracks); a finding of a model in training mode says that it is."""
    import torch

    with torch.no_grad():
        record, found = _lower_to(destination, subject)
    if record.status not in ("ok", "mismatch") and not record.errors:
        # Every failing status says what happened, in the record too (a mismatch's
        # outputs say it): the first line of each finding, else why it stopped short,
        # else what to install.
        said = tuple(d.message.split("\n", 1)[0] for d in found if d.severity == "error")
        if not said and record.skipped:
            said = (record.skipped,)
        elif not said and record.status == "unavailable":
            said = (f"not installed: {destination.install}",)
        record = replace(record, errors=said)
    if subject.training and record.status in ("error", "mismatch", "unsupported", "missing-kernel"):
        found = [_in_training(d, subject) if d.code.startswith(f"lowering/{destination.format}-") and d.severity == "error" else d for d in found]
    return record, found


def _in_training(d: Diagnostic, subject: Subject) -> Diagnostic:
    """A failure or mismatch of a model in training mode: said first for a failure (the
    library's message after it is long), last for a mismatch (after the numbers)."""
    note = (
        f"The model is in training mode, with {subject.training}: these layers compute otherwise in eval mode, "
        "which is what a deployed model runs -- the likely cause; call `.eval()` on the model (see the `training-mode` warning at its declaration)"
    )
    return replace(d, message=d.message + "\n" + note if d.code.endswith("-mismatch") else note + ".\n" + d.message)


def _lower_to(destination: Destination, subject: Subject) -> tuple[Lowering, list[Diagnostic]]:
    started = time.perf_counter()
    error = f"lowering/{destination.format}-error"

    def ms() -> float:
        return (time.perf_counter() - started) * 1000

    missing = missing_packages(destination.packages)
    if missing:
        found = []
        if destination.format not in _missing_said:
            _missing_said.add(destination.format)
            what = ", ".join(f"`{m}`" for m in missing)
            message = f"lowering to {destination.title} needs {what}, which cannot be imported here: run `{destination.install}` in this environment"
            found.append(Diagnostic.at(error, message, subject.candidate.where, subject.name))
        return Lowering(destination.format, "unavailable", ms()), found

    # An extra built against one torch (executorch) with another torch: said, not run.
    mismatch = next((m for m in map(torchversion.pairing, destination.packages) if m), None)
    if mismatch is not None:
        found = []
        if destination.format not in _missing_said:
            _missing_said.add(destination.format)
            found.append(Diagnostic.at(error, f"lowering to {destination.title} is off: {mismatch}", subject.candidate.where, subject.name))
        return Lowering(destination.format, "unavailable", ms(), errors=(mismatch,)), found

    versions = ", ".join(f"{p} {_version(p)}" for p in destination.packages)
    lowered = destination.lower(subject, versions)
    if lowered.program is None:
        return replace(lowered.record, lower_ms=ms()), lowered.found
    record, found = lowered.record, lowered.found

    def before(doing: str, needs: tuple[str, SourceLine, tuple[Related, ...], bool] | None = None) -> None:
        if subject.report is None:
            return
        if needs is None:
            pending = Diagnostic.at(error, doing, subject.candidate.where, subject.name)
            subject.report(record, found, pending, False)
        else:
            what, where, related, decided = needs
            subject.report(
                record, found, Diagnostic.at(error, f"{doing}; {what}", where, subject.name, related), decided
            )

    before(f"while running the model eagerly on the example inputs, to compare with {destination.runtime}")
    try:
        expected = eager_outputs(subject.built)
    except Exception as e:  # noqa: BLE001 - the export ran it fake; running it for real may still fail
        message = f"running the model eagerly on the example inputs, to compare with {destination.runtime}, raised {fx_nodes.text(e)}"
        return replace(record, status="error", errors=(message,), lower_ms=ms()), found + [
            Diagnostic.at(error, message, subject.candidate.where, subject.name)
        ]
    before(f"while running the {destination.product} in {destination.runtime} on the example inputs", lowered.needs)
    try:
        actual = destination.run(lowered, subject)
        record = replace(record, run_peak_bytes=lowered.record.run_peak_bytes)
    except Stop as stop:
        return replace(record, status=stop.status, errors=record.errors + stop.errors, lower_ms=ms()), found + stop.found
    except Exception as e:  # noqa: BLE001 - any runtime failure is a finding
        message = f"{destination.runtime} failed to run the {destination.product} on the example inputs: {fx_nodes.text(e)}"
        return replace(record, status="error", errors=(message,), lower_ms=ms()), found + [Diagnostic.at(error, message, subject.candidate.where, subject.name)]
    path = subject.loaded.path
    draws = random_outputs(subject.ep, subject.line_of)
    drawn = drawn_lines(subject.built, subject.sources) if draws else []
    random = {j: describe(tuple(placed(d, drawn) for d in ds), path) for j, ds in draws.items()}
    outputs = compare_outputs(lowered.output_names, actual, expected, user_outputs(subject.ep), random, destination.runtime)
    ok = all(o.ok for o in outputs)
    record = replace(record, status="ok" if ok else "mismatch", outputs=outputs, lower_ms=ms())
    if ok:
        return record, found
    return record, found + mismatch_diagnostics(f"lowering/{destination.format}-mismatch", destination.runtime, outputs, subject.signature, subject.candidate)


@contextlib.contextmanager
def quiet(*loggers: str) -> Iterator[None]:
    """The named loggers at ERROR and warnings off, while a destination's library
    imports, lowers or runs: what they say (an optional package missing, their own
    deprecations and notes) is not the user's business, and in the job it would land
    in the model's output."""
    found = [logging.getLogger(name) for name in loggers]
    levels = [logger.level for logger in found]
    for logger in found:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(found, levels, strict=True):
            logger.setLevel(level)
