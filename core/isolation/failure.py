"""What a job process that did not finish becomes for the user: the diagnostic for a
timeout, a memory blow-up or a crash, at the line of the model file that was running.

The zygote (``exportlens.core.isolation.zygote``) only supervises; the words and the
line it reports come from here.
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass, replace

from exportlens.core.export.weights import real_weights_note
from exportlens.core.model.events import LoweringState
from exportlens.core.model.lowering import TITLES, Lowering
from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import JOB_DIED, Diagnostic, TargetDecl, TargetResult


@dataclass(frozen=True)
class Failure:
    """How a job ended early, as the zygote saw it."""

    code: str  # "timeout", "out-of-memory" or "worker-crash"
    target: str | None  # the target being exported (the last ``TargetBegins``), if any
    detail: str = ""  # for a crash: how the process ended (``exit_text``)
    dump: str = ""  # the faulthandler stack dump the job left behind
    output: str = ""  # the tail of what the job printed


def failure_diagnostic(request: ExportRequest, failure: Failure, decl: TargetDecl | None) -> Diagnostic:
    """The diagnostic for a job that timed out, blew its memory or died."""
    name = failure.target
    located = locate_in_project(failure.dump, request)
    path, line = located if located is not None else (None, None)
    what = f"export of '{name}'" if name else f"loading {os.path.basename(request.path)}"
    where = "at this line" if line else "(no line of this file or its project was running)"
    limits = request.limits
    if failure.code == "timeout":
        message = f"{what} took longer than {limits.timeout_s:g} s (limit: --timeout); it was stopped {where}"
    elif failure.code == "out-of-memory":
        message = (
            f"{what} used more than {limits.memory_mb} MB of memory "
            f"(limit: {limits.memory_mb} MB resident); it was stopped {where}"
        )
        note = real_weights_note(request)
        if note:
            message += f"\n{note}"
    else:
        message = f"the export process died {failure.detail} during {what}" + ("; it crashed at this line" if line else "")
    output = failure.output.strip()
    if output and failure.code == "worker-crash":
        message += "\nlast output:\n" + "\n".join(output.splitlines()[-8:])
    line = line or (decl.line if decl else 1)
    # Only a failure inside a target belongs to it; before its ``TargetBegins`` it is file-level.
    return Diagnostic(code=failure.code, message=message, line=line, target=name, path=path)


def lowering_failure(
    request: ExportRequest,
    failure: Failure,
    exported: tuple[TargetResult, list[Diagnostic]],
    state: LoweringState | None,
) -> tuple[TargetResult, list[Diagnostic]]:
    """A job that died while lowering a target it had exported: the export's result as
    the job sent it (``TargetExported``), the lowerings it finished, the one in progress
    an ``error`` that says what stopped it, and a ``lowering/<format>-error`` where the
    job said the step in progress stands (``LoweringState.pending``)."""
    result, found = exported
    if state is None or not state.lowerings:
        format = request.lower[0] if request.lower else "onnx"
        state = LoweringState(result.name, (Lowering(format, "error"),))
    *finished, current = state.lowerings
    title = TITLES.get(current.format, current.format)
    limits = request.limits
    if failure.code == "timeout":
        cause = f"took longer than the {limits.timeout_s:g} s a target may take (limit: --timeout, `timeout`), and was stopped"
    elif failure.code == "out-of-memory":
        cause = f"went over the job's memory cap ({limits.memory_mb} MB resident; limit: --memory-mb, `memory_mb`), and was stopped"
    else:
        cause = f"ended the export process {failure.detail}".rstrip()
    doing = state.pending.message if state.pending is not None else f"while lowering to {title}"
    message = f"lowering to {title} {cause} {doing}. The export itself is fine: the target exported, and its signature and diagnostics stand"
    output = failure.output.strip()
    if output and failure.code == "worker-crash":
        message += "\nlast output:\n" + "\n".join(output.splitlines()[-8:])
    code = f"lowering/{current.format}-error"
    located = locate_in_project(failure.dump, request)
    facts = ((JOB_DIED, failure.code),)
    # The Dims decide how much memory the step takes, not whether it crashes or how long it runs.
    decided = state.decided and failure.code == "out-of-memory"
    if state.pending is not None and (decided or located is None):
        diagnostic = replace(state.pending, code=code, message=message, level=None, facts=facts)
    else:
        path, line = located or (None, result.line)
        diagnostic = Diagnostic(code=code, message=message, line=line, target=result.name, path=path, facts=facts)
    stopped = replace(current, status="error", errors=(*current.errors, message.split("\n", 1)[0]))
    return replace(result, lowerings=(*finished, stopped)), [*found, *state.diagnostics, diagnostic]


def signal_text(sig: int) -> str:
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    desc = signal.strsignal(sig) or ""
    return f"{name} ({desc.lower()})" if desc else name


def exit_text(code: int) -> str:
    """How a job process ended, from its exit code as ``subprocess`` gives it (``procs.exit_code``):
    negative for the signal that ended it."""
    if code < 0:
        sig = -code
        text = f"with {signal_text(sig)}"
        if sig == getattr(signal, "SIGKILL", None):
            text += " (killed from outside, perhaps the system ran out of memory)"
        return text
    if code == 70:
        return "with exit code 70 (an internal exportlens error; see the output below)"
    return f"with exit code {code} (os._exit or a native library ended the process)"


_FRAME = re.compile(r'^\s*File "(.*)", line (\d+) in ')


def locate_in_project(dump: str, request: ExportRequest) -> tuple[str | None, int] | None:
    """``(path, line)`` of the deepest line of the model file in a faulthandler dump
    (path None), else of another file of its project (its real path)."""
    frames = [(m.group(1), int(m.group(2))) for m in map(_FRAME.match, dump.splitlines()) if m]
    path = os.path.realpath(request.path)
    for fname, line in frames:  # most recent call first
        if os.path.realpath(fname) == path:
            return None, line
    if request.root:
        root = os.path.join(os.path.realpath(request.root), "")
        for fname, line in frames:
            real = os.path.realpath(fname)
            if real.startswith(root) and "site-packages" not in real:
                return real, line
    return None
