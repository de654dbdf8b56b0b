"""A result against the snapshot: where each ``signature-changed`` lands, its severity,
removed targets, files that did not run, and the pipeline's ``compare``/``vanished``."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from exportlens.core.contract.check import check_file, vanished
from exportlens.core.contract.record import update
from exportlens.core.contract.snapshot import SNAPSHOT_NAME, Snapshot, entry_of, write
from exportlens.core.model.results import Diagnostic, FileResult, TargetResult
from exportlens.core.model.signature import ArgSpec, InputSpec, OutputSpec, Signature, SourceLine, TensorMeta
from exportlens.core.pipeline import Pipeline

CLASS_LINE, WEIGHT_LINE, FORWARD_LINE, RETURN_LINE = 4, 7, 9, 10


def signature(width: int = 4, batch_max: int = 32) -> Signature:
    return Signature(
        (
            InputSpec("PARAMETER", ArgSpec("tensor", "p_fc_weight", meta=TensorMeta("float32", (width, 8), "cpu")), "fc.weight", None, SourceLine(WEIGHT_LINE, 9, WEIGHT_LINE, 30)),
            InputSpec("USER_INPUT", ArgSpec("tensor", "x", meta=TensorMeta("float32", ("s77", 8), "cpu")), None, None, SourceLine(FORWARD_LINE, 23, FORWARD_LINE, 24)),
        ),
        (OutputSpec("USER_OUTPUT", ArgSpec("tensor", "linear", meta=TensorMeta("float32", ("s77", width), "cpu")), None, SourceLine(RETURN_LINE, 9, RETURN_LINE, 30)),),
        {"s77": (1, batch_max)},
        {"s77": "batch"},
    )


def result(path: str = "/p/m.py", **targets: Signature | None) -> FileResult:
    return FileResult(path, targets=tuple(TargetResult(name, CLASS_LINE, "ok" if sig else "error", 1.0, sig) for name, sig in targets.items()))


RECORDED = {"Net": entry_of(signature())}


def found(r: FileResult) -> list[tuple[int, str, str, str]]:
    return [(d.line, d.severity, d.message.split("\n")[0], d.target or "") for d in r.diagnostics if d.code == "signature-changed"]


def test_unchanged_adds_nothing() -> None:
    r = result(Net=signature())
    assert check_file(r, RECORDED) is r


def test_wider_output_is_an_error_at_the_return_and_the_weight_line() -> None:
    r = check_file(result(Net=signature(width=6)), RECORDED)
    assert found(r) == [
        (WEIGHT_LINE, "error", "parameter `fc.weight`: float32[4, 8] -> float32[6, 8]", "Net"),
        (RETURN_LINE, "error", "output 0: float32[batch, 4] -> float32[batch, 6]", "Net"),
    ]
    assert r.has_errors
    ret = next(d for d in r.diagnostics if d.line == RETURN_LINE)
    assert (ret.column, ret.end_line, ret.end_column) == (9, RETURN_LINE, 30)
    assert ret.message.endswith("run `exportlens snapshot` to record it")


def test_widened_range_is_information_at_the_forward_parameter() -> None:
    r = check_file(result(Net=signature(batch_max=64)), RECORDED)
    assert found(r) == [(FORWARD_LINE, "information", "input `x`: float32[batch, 8] (batch in [1, 32]) -> float32[batch, 8] (batch in [1, 64])", "Net")]
    assert not r.has_errors


def test_removed_output_points_at_the_return_removed_input_at_forward() -> None:
    sig = signature()
    no_output = replace(sig, outputs=())
    r = check_file(result(Net=no_output), RECORDED)
    assert [(line, sev) for line, sev, _, _ in found(r)] == [(CLASS_LINE, "error")]  # nothing left to point at
    fewer = replace(sig, inputs=sig.inputs[1:])
    r = check_file(result(Net=fewer), RECORDED)
    assert found(r) == [(FORWARD_LINE, "error", "parameter `fc.weight` removed (was float32[4, 8])", "Net")]


def test_new_target_is_information_removed_target_an_error_at_line_1() -> None:
    r = check_file(result(Other=signature()), RECORDED)
    assert found(r) == [
        (1, "error", f"target `Net` is recorded in {SNAPSHOT_NAME} but no longer declared", "Net"),
        (CLASS_LINE, "information", f"target `Other` is not in {SNAPSHOT_NAME}", "Other"),
    ]


def test_a_failed_export_or_a_file_that_did_not_run_is_not_compared() -> None:
    failed = result(Net=None)
    assert check_file(failed, RECORDED) is failed
    broken = FileResult("/p/m.py", diagnostics=(Diagnostic("import-error", "boom", 3),))
    assert check_file(broken, RECORDED) is broken


def test_vanished_files_under_the_scopes(tmp_path: Path) -> None:
    snap = Snapshot({"gone.py": RECORDED, "sub/kept.py": RECORDED, "elsewhere/x.py": RECORDED})
    root = str(tmp_path)
    got = vanished(snap, root, [str(tmp_path / "sub"), str(tmp_path / "gone.py")], checked={str(tmp_path / "sub" / "kept.py")})
    assert [(Path(r.path).name, found(r)) for r in got] == [("gone.py", [(1, "error", f"target `Net` is recorded in {SNAPSHOT_NAME} but no longer declared", "Net")])]


def test_pipeline_compares_only_when_the_project_has_a_snapshot(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    model = str(tmp_path / "pkg" / "m.py")
    r = result(model, Net=signature(width=6))
    pipeline = Pipeline()
    unchecked = pipeline.compare(r)
    assert unchecked.diagnostics == () and unchecked.targets == r.targets
    # The snapshot is a dependency of what is shown even before it exists: creating it
    # makes the server check the open file again.
    assert unchecked.local_imports == (os.path.realpath(tmp_path / SNAPSHOT_NAME),)
    assert unchecked.local_import_hashes == ("absent",)
    write(str(tmp_path / SNAPSHOT_NAME), Snapshot({"pkg/m.py": RECORDED, "pkg/old.py": RECORDED}))
    assert [line for line, *_ in found(pipeline.compare(r))] == [WEIGHT_LINE, RETURN_LINE]
    [old] = pipeline.vanished([str(tmp_path)], [model])
    assert old.path == str(tmp_path / "pkg" / "old.py")
    (tmp_path / SNAPSHOT_NAME).write_text('{"version": 1, "files": {"pkg/m.py": {"Net": 1}}}')
    [(line, severity, message, _)] = found(pipeline.compare(r))
    assert (line, severity) == (1, "error") and "is not an object" in message


def test_update_records_exported_keeps_failed_and_drops_vanished(tmp_path: Path) -> None:
    root = str(tmp_path)
    old = Snapshot({"m.py": {"Net": entry_of(signature()), "Broken": entry_of(signature()), "Gone": entry_of(signature())}, "deleted.py": RECORDED, "other/x.py": RECORDED})
    run = [result(str(tmp_path / "m.py"), Net=signature(width=6), Broken=None, New=signature())]
    upd = update(old, root, run, scopes=[root + "/m.py", root + "/deleted.py"])
    assert sorted(upd.snapshot.files) == ["m.py", "other/x.py"]
    assert sorted(upd.snapshot.files["m.py"]) == ["Broken", "Net", "New"]
    assert upd.snapshot.files["m.py"]["Broken"] == old.files["m.py"]["Broken"]
    assert (upd.added, upd.changed, upd.kept) == (["m.py: New"], ["m.py: Net"], ["m.py: Broken"])
    assert sorted(upd.removed) == ["deleted.py: Net", "m.py: Gone"]
    assert old.files["m.py"]["Net"] == entry_of(signature())  # the old snapshot is left as it was
