"""A job that dies while lowering a target it exported keeps that export
(``attempts`` with a stand-in for the job processes, as the zygote records their
events): the target stays ``ok`` with its signature and diagnostics, the lowerings
it finished stand, the one in progress is an ``error`` saying what stopped it, and
its diagnostic stands where the job said the step's size is decided -- else at the
line the job was stopped at, else at the target. No run again with real weights:
the export, which is what weights could change, already finished."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from exportlens.core.cache.policy import cacheable
from exportlens.core.isolation.attempts import run_request
from exportlens.core.isolation.failure import Failure, lowering_failure
from exportlens.core.isolation.pipes import Tail
from exportlens.core.isolation.supervise import Attempt, on_event
from exportlens.core.model.events import LoweringState, TargetBegins, TargetDone, TargetExported, TargetsFound
from exportlens.core.model.lowering import Lowering
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.model.results import JOB_DIED, Diagnostic, FileResult, Related, TargetDecl, TargetResult
from exportlens.core.model.signature import ArgSpec, InputSpec, OutputSpec, Signature, SourceLine

PATH = "/nowhere/model.py"
REQUEST = ExportRequest(id=1, path=PATH, root="/nowhere", source="x = 1\n" * 40, limits=Limits(timeout_s=60, memory_mb=2048), lower=("onnx", "executorch"))
DECLS = (TargetDecl("Net", 7, "globals", False), TargetDecl("Other", 20, "decorator", False))
SIGNATURE = Signature((InputSpec("USER_INPUT", ArgSpec("TensorArgument", "x")),), (OutputSpec("USER_OUTPUT", ArgSpec("TensorArgument", "relu")),))
EXPORTED = TargetResult("Net", 7, "ok", 12.5, SIGNATURE)
TRAINING = Diagnostic.at("training-mode", "in training mode", SourceLine(9), "Net")
ONNX = Lowering("onnx", "ok", opset=20)
BUILT = Lowering("executorch", "error", delegated_ops=2, total_ops=2, planned_memory_bytes=1 << 30, workspace_bytes=1 << 33, memory_dims="`h` up to 1024")
NOT_DELEGATED = Diagnostic.at("lowering/executorch-not-delegated", "`aten::view_copy` is not delegated", SourceLine(14, 9), "Net")
# A faulthandler dump whose deepest line of the model file is 11.
DUMP = f'Fatal Python error: Segmentation fault\n\nCurrent thread:\n  File "{PATH}", line 11 in forward\n  File "/x/job.py", line 3 in run\n'


def _pending(decided: bool) -> LoweringState:
    where = SourceLine(30, 9) if decided else SourceLine(7)
    related = (Related(PATH, 31, "`w` is declared here", 9),) if decided else ()
    pending = Diagnostic.at("lowering/executorch-error", "while running the program in ExecuTorch's runtime on the example inputs; its memory plan is 1.0 GB", where, "Net", related)
    return LoweringState("Net", (ONNX, BUILT), (NOT_DELEGATED,), pending, decided)


def _run(state: LoweringState, failure: str, detail: str = "", weights: str = "auto") -> tuple[FileResult, list[ExportRequest]]:
    asked: list[ExportRequest] = []

    def run_child(request: ExportRequest, tail: Tail) -> Attempt:
        asked.append(request)
        attempt = Attempt()
        if "Net" not in request.skip:
            for event in (TargetsFound(DECLS), TargetBegins("Net"), TargetExported(EXPORTED, (TRAINING,)), state):
                on_event(event, request, attempt, lambda _: None)
            attempt.failure, attempt.detail, attempt.dump = failure, detail, DUMP
            return attempt
        on_event(TargetsFound(DECLS), request, attempt, lambda _: None)
        other = TargetResult("Other", 20, "ok", 3.0, SIGNATURE)
        on_event(TargetDone(other, ()), request, attempt, lambda _: None)
        attempt.result = FileResult(path=PATH, targets=(other,))
        return attempt

    result = run_request(replace(REQUEST, weights=weights), run_child)
    assert result is not None
    return result, asked


def test_out_of_memory_while_lowering_keeps_the_export_and_says_so_at_the_dims() -> None:
    result, asked = _run(_pending(decided=True), "out-of-memory")
    net, other = result.targets
    assert (net.name, net.status, net.signature, net.export_ms) == ("Net", "ok", SIGNATURE, 12.5)
    assert other.name == "Other" and other.status == "ok"
    onnx, executorch = net.lowerings
    assert onnx == ONNX
    assert executorch.status == "error" and executorch.planned_memory_bytes == 1 << 30 and executorch.delegated_ops == 2
    assert executorch.errors == ("lowering to ExecuTorch went over the job's memory cap (2048 MB resident; limit: --memory-mb, `memory_mb`), and was stopped while running the program in ExecuTorch's runtime on the example inputs; its memory plan is 1.0 GB. The export itself is fine: the target exported, and its signature and diagnostics stand",)
    codes = [(d.code, d.line, d.target) for d in result.diagnostics]
    assert codes == [("training-mode", 9, "Net"), ("lowering/executorch-not-delegated", 14, "Net"), ("lowering/executorch-error", 30, "Net")]
    died = result.diagnostics[-1]
    assert died.severity == "error" and died.column == 9 and died.related == (Related(PATH, 31, "`w` is declared here", 9),)
    assert [r.skip for r in asked] == [(), ("Net",)]


def test_a_crash_while_lowering_is_at_the_line_it_crashed_and_never_run_again_with_real_weights() -> None:
    result, asked = _run(_pending(decided=False), "worker-crash", "with SIGSEGV (segmentation fault)")
    net = result.targets[0]
    assert net.status == "ok" and net.lowerings[-1].status == "error"
    died = result.diagnostics[-1]
    assert (died.code, died.line) == ("lowering/executorch-error", 11)
    assert died.message.startswith("lowering to ExecuTorch ended the export process with SIGSEGV (segmentation fault) while running the program")
    assert not result.fallbacks and [r.weights for r in asked] == ["auto", "auto"]


def test_a_timeout_before_lowering_said_how_far_it_came_is_at_the_target() -> None:
    # Only the export's event arrived: the first format in progress, nothing found yet.
    result, _ = _run(LoweringState("Net", (), ()), "timeout")
    net = result.targets[0]
    [lowering] = net.lowerings
    assert (lowering.format, lowering.status) == ("onnx", "error")
    died = result.diagnostics[-1]
    assert (died.code, died.line) == ("lowering/onnx-error", 11)
    assert "took longer than the 60 s a target may take" in died.message and "while lowering to ONNX" in died.message


def test_a_crash_at_the_dims_step_is_at_the_line_it_crashed_not_the_dims() -> None:
    # The Dims decide how much memory the run takes, not whether it crashes.
    result, _ = _run(_pending(decided=True), "worker-crash", "with SIGSEGV (segmentation fault)")
    died = result.diagnostics[-1]
    assert (died.code, died.line, died.path) == ("lowering/executorch-error", 11, None)


def test_a_death_in_another_file_of_the_project_is_placed_in_that_file(tmp_path: Path) -> None:
    helper = tmp_path / "helpers.py"
    helper.write_text("def f():\n    pass\n\n\ndef g(x):\n    return x.hog()\n")
    dump = f'Current thread:\n  File "{helper}", line 6 in g\n  File "/x/job.py", line 3 in run\n'
    request = replace(REQUEST, root=str(tmp_path), path=str(tmp_path / "model.py"))
    exported = (replace(EXPORTED), [TRAINING])
    result, found = lowering_failure(request, Failure("timeout", "Net", dump=dump), exported, LoweringState("Net", (BUILT,), (), None))
    assert result.status == "ok"
    died = found[-1]
    assert (died.code, died.path, died.line) == ("lowering/executorch-error", os.path.realpath(helper), 6)


def test_a_lowering_death_is_never_cached() -> None:
    result, _ = _run(_pending(decided=True), "out-of-memory")
    assert result.diagnostics[-1].fact(JOB_DIED) == "out-of-memory"
    assert not cacheable(result)
    # The same result without the death is cacheable: the fact alone decides.
    assert cacheable(replace(result, diagnostics=result.diagnostics[:-1]))
