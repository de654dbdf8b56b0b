"""What an export produces for the user: diagnostics, and per-target results.

Plain, torch-free dataclasses. They cross the worker -> CLI/server seam (encoded by
``exportlens.core.model.plain``) and the core -> server seam (lsprotocol never enters core).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from exportlens.core.model.lowering import Lowering
from exportlens.core.model.signature import Signature, SourceLine

Severity = Literal["error", "warning", "information", "hint"]

# The contract's table: code -> severity.
CODES: dict[str, Severity] = {
    "syntax-error": "error",
    "import-error": "error",
    "target-error": "error",
    "eager-error": "error",
    "data-dependent": "error",
    "constraint-violation": "error",
    "unsupported": "error",
    "unsupported-type": "error",
    "export-error": "error",
    "banned-mutation/input-metadata": "error",
    "banned-mutation/parameter": "error",
    # The highest of its severities: "warning" when export drops the assignment.
    "banned-mutation/tensor-attribute": "error",
    "mutation/buffer": "information",
    "mutation/user-input": "warning",
    "mutation/parameter": "warning",
    "unknown-input-kind": "warning",
    "unknown-output-kind": "warning",
    "timeout": "error",
    "worker-crash": "error",
    "out-of-memory": "error",
    # The highest of its severities: "information" when the change is compatible.
    "signature-changed": "error",
    # The module is in training mode while it holds layers that compute otherwise in
    # eval mode (BatchNorm, Dropout): rarely what a deployed program should do.
    "training-mode": "warning",
    # Lowering (``lower = ["onnx", "executorch"]``): the step after export that users export for.
    "lowering/onnx-unsupported": "error",
    "lowering/onnx-error": "error",
    "lowering/onnx-mismatch": "error",
    "lowering/executorch-error": "error",
    "lowering/executorch-missing-kernel": "error",
    "lowering/executorch-mismatch": "error",
    "lowering/executorch-not-delegated": "information",
    # The program needs more memory at its Dims' maxima than the job's cap leaves: not run.
    "lowering/executorch-memory": "warning",
    # The program needs more memory than its budget (``memory_budget``).
    "lowering/executorch-over-budget": "error",
    # The language server's, instead of an export: the file's folder is not trusted.
    "untrusted-folder": "information",
    # The language server's, instead of an export: the environment's torch is outside the
    # supported range (``exportlens.core.torchversion``); the CLI exits 2 with the sentence.
    "unsupported-torch": "error",
}
# Where each code is explained: its section of docs/diagnostics.md (the editor's
# code link, SARIF's helpUri).
DOCS_URL = "https://github.com/exportlens/exportlens/blob/main/docs/diagnostics.md"


def docs_anchor(code: str) -> str:
    """``mutation/buffer`` -> ``…/diagnostics.md#mutation-buffer`` (one heading per code)."""
    return f"{DOCS_URL}#{code.replace('/', '-')}"


# Codes whose diagnostics carry their own severity (``Diagnostic.level``), each with
# every severity it may have, highest first (the docs name them all).
VARIABLE_SEVERITY: dict[str, tuple[Severity, ...]] = {
    "signature-changed": ("error", "information"),
    # error: export fails on its in-place update; warning: export drops its assignment.
    "banned-mutation/tensor-attribute": ("error", "warning"),
}


# A diagnostic's fact (``Diagnostic.facts``) saying its job was stopped -- a lowering
# that ran out of time or memory, or crashed -- with how ("timeout", "out-of-memory",
# "worker-crash"): a result of the machine's state, never cached.
JOB_DIED = "job-died"


@dataclass(frozen=True)
class Related:
    """A second place that explains a diagnostic (the guard's origin, a ``Dim``)."""

    path: str
    line: int
    message: str
    column: int = 1


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    line: int  # 1-based
    column: int = 1  # 1-based
    end_line: int | None = None
    end_column: int | None = None
    target: str | None = None
    related: tuple[Related, ...] = ()
    # Set only for the codes of VARIABLE_SEVERITY (a compatible signature change is
    # information, a breaking one an error); None: the code's severity in CODES.
    level: Severity | None = None
    # The file of the line when it is not the result's own file: the local module
    # where the code is (a model class in ``pkg/model.py``), as a real path.
    path: str | None = None
    # What the job learned that a fix needs and the message does not carry, as
    # ``(key, value)`` strings: a data-dependent guard's expression, its value on the
    # example inputs, and the user's names of its symbols (``core/fixes/checks``).
    facts: tuple[tuple[str, str], ...] = ()

    def fact(self, key: str) -> str | None:
        return next((v for k, v in self.facts if k == key), None)

    @property
    def severity(self) -> Severity:
        if self.level is not None and self.code in VARIABLE_SEVERITY:
            return self.level
        return CODES.get(self.code, "error")

    @classmethod
    def at(
        cls,
        code: str,
        message: str,
        where: SourceLine | None,
        target: str | None = None,
        related: tuple[Related, ...] = (),
        level: Severity | None = None,
        facts: tuple[tuple[str, str], ...] = (),
    ) -> Diagnostic:
        where = where or SourceLine(1)
        return cls(
            code=code,
            message=message,
            line=where.line,
            column=where.column,
            end_line=where.end_line,
            end_column=where.end_column,
            target=target,
            related=related,
            level=level,
            path=where.path,
            facts=facts,
        )


TargetStatus = Literal["ok", "error"]


@dataclass(frozen=True)
class ProgramRun:
    """The exported program run once on the example inputs, after the export
    (``core/export/program_run``): ``ok``; ``failed`` (an ``eager-error`` says where);
    ``skipped`` when that was not cheap or not meaningful, ``reason`` saying why."""

    status: Literal["ok", "failed", "skipped"]
    reason: str = ""

    def describe(self) -> str:
        """``runs on the example inputs``, ``not run on the example inputs: ...``."""
        if self.status == "ok":
            return "runs on the example inputs"
        if self.status == "failed":
            return "the program fails on the example inputs"
        return f"not run on the example inputs: {self.reason}"


@dataclass(frozen=True)
class TargetResult:
    name: str
    line: int
    status: TargetStatus
    export_ms: float | None = None
    signature: Signature | None = None
    # The exported graph as torch prints it (``ep.graph_module.print_readable``),
    # for "show graph"; empty when the export failed.
    graph: str = ""
    # The exported program (``exportlens.dumps`` without weights, the target's
    # diagnostics inside), so the cache keeps every program; read it without torch
    # with ``exportlens.read_program``. Empty when the export failed.
    program: bytes = b""
    # What lowering the program found, one record per format the request asked for
    # (``lower``), in its order, when the export succeeded; else empty.
    lowerings: tuple[Lowering, ...] = ()
    # The ``class`` line of the exported module's class, in the file it is defined in
    # (``path`` set when that is a local module, not the declaring file): where a
    # model module's view of this target shows its signature.
    module_class: SourceLine | None = None
    # What the export was made from: "fake" (large tensors built without values, see
    # ``exportlens.core.export.weights``) or "real"; None when no module was built.
    weights: str | None = None
    # Why, when there is something to say: why real weights were used (a fallback), or
    # why values were not available to a step that wanted them.
    weights_note: str = ""
    # The program run on the example inputs after the export; None when the export
    # failed (or the result is older than the check).
    run: ProgramRun | None = None

    def lowering(self, format: str) -> Lowering | None:
        """The record of lowering to ``format``, if it was asked for."""
        return next((low for low in self.lowerings if low.format == format), None)


def weights_phrase(t: TargetResult) -> str | None:
    """How the front ends name what a target's result was made from, when it is worth
    saying: "fake weights" always (the model was built without values), "real
    weights" when exportlens chose them (``weights_note`` says why); None otherwise."""
    if t.weights == "fake":
        return "fake weights"
    if t.weights == "real" and t.weights_note:
        return "real weights"
    return None


@dataclass(frozen=True)
class Fallback:
    """A target (None: the whole file) that must run again with real weights, and why
    (``exportlens.core.export.weights``). Only between a job and its worker: the worker
    runs them again and the result it returns has none left."""

    target: str | None
    reason: str


@dataclass(frozen=True)
class Verdict:
    """What a ``Trial`` found: ``kept`` (the target exports without the diagnostic and
    its program's outputs equal the model's), ``changed`` (it exports, the outputs
    differ: ``detail`` says which), ``failed`` (it does not export, or the diagnostic
    or another error remains: ``diagnostics`` are the edited file's, for a next fix)."""

    id: int
    status: Literal["kept", "changed", "failed"]
    detail: str = ""
    diagnostics: tuple[Diagnostic, ...] = ()
    export_ms: float = 0.0


@dataclass(frozen=True)
class FileResult:
    path: str
    diagnostics: tuple[Diagnostic, ...] = ()
    targets: tuple[TargetResult, ...] = ()
    # What the run depended on (absolute real paths under the project root): the local
    # modules it imported or tried to import -- found, raising, or not there at all --
    # and the project files it read. Changing, creating or deleting one invalidates
    # this result. (The name predates the files read.)
    local_imports: tuple[str, ...] = ()
    # The tail of what the model printed, kept for crash reports.
    output_tail: str = ""
    elapsed_ms: float = 0.0
    # The state of each of ``local_imports`` as the run saw it, parallel to it: the
    # sha256 (hex) of the bytes it read, or "absent" (a module looked for and not
    # found). The cache keys the result by what actually ran, not by what is on disk
    # by the time it stores it.
    local_import_hashes: tuple[str, ...] = ()
    # Project files the run wrote, renamed, removed or touched, and the state it left
    # each in (as above), parallel: not inputs, and the server ignores a change to
    # one while it still holds what the run left (else a model that writes a module
    # next to itself would be exported again, forever).
    written: tuple[str, ...] = ()
    written_hashes: tuple[str, ...] = ()
    # Top-level modules the run imported and found nowhere (``ModuleNotFoundError``):
    # a missing installed package is no file of the project, so the cache checks at
    # lookup that each is still not installed (``exportlens.core.cache.store``).
    missing_modules: tuple[str, ...] = ()
    # Targets to run again with real weights (a job's result only; see ``Fallback``).
    fallbacks: tuple[Fallback, ...] = ()
    # The installed libraries the model's code imported (each by its top-level module's
    # real path) and, parallel, the state of each that the run used: upgrading one
    # invalidates this result (``exportlens.core.export.libraries``).
    libraries: tuple[str, ...] = ()
    library_states: tuple[str, ...] = ()
    # A verification job's answers, one per ``ExportRequest.trials`` (``core/fixes/verified``).
    verdicts: tuple[Verdict, ...] = ()

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)

    def sorted(self) -> FileResult:
        diags = tuple(sorted(self.diagnostics, key=lambda d: (d.line, d.column, d.code)))
        return replace(self, diagnostics=diags)


@dataclass(frozen=True)
class TargetDecl:
    """A declared target as found in a file, before it is exported."""

    name: str
    line: int
    form: Literal["globals", "decorator", "pyproject"]
    strict: bool = False


__all__ = [
    "CODES",
    "DOCS_URL",
    "VARIABLE_SEVERITY",
    "weights_phrase",
    "Diagnostic",
    "Fallback",
    "FileResult",
    "ProgramRun",
    "Related",
    "TargetDecl",
    "TargetResult",
    "docs_anchor",
    "field",
]
