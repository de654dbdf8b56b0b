"""Lowering an exported program to where it is deployed: the step users export for.

A program that exports can still fail there: an op with no translation, a model the
checker rejects, numbers that differ in the runtime. With ``lower = [...]`` the job
does, right after a successful export and inside the same job process (so under the
same timeout and memory cap), for each requested destination: lower the program,
run it on the example inputs, compare with the eager outputs. Its findings are
diagnostics at the user's lines (``lowering/<format>-*``) and a ``Lowering`` record
per destination on the target's result.

- ``destination.py``: the interface (lower, run) and the run every destination shares;
- ``outputs.py`` + ``numerics.py``: the comparison with eager, shared;
- ``nodes.py``: from a failure or a node to the user's line, shared;
- one module per destination: ``onnx.py``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from exportlens.core.export.loader import Loaded
from exportlens.core.export.lowering.destination import Destination, Subject, lower_to
from exportlens.core.export.targets import Built, Candidate
from exportlens.core.model.results import Diagnostic, TargetResult


def destination(format: str) -> Destination:
    """The destination of a format of ``LOWER_FORMATS`` (its module is imported here:
    a job that lowers nothing imports none)."""
    if format == "onnx":
        from exportlens.core.export.lowering.onnx import Onnx

        return Onnx()
    raise ValueError(f"no lowering destination {format!r}")


def lower_target(
    formats: tuple[str, ...], keep: bool, result: TargetResult, found: list[Diagnostic], ep: Any, built: Built, candidate: Candidate, loaded: Loaded
) -> tuple[TargetResult, list[Diagnostic]]:
    """``result`` with its lowering recorded, ``found`` with the lowering's diagnostics."""
    if "onnx" not in formats or result.status != "ok":
        return result, found
    subject = Subject(ep, built, candidate, loaded, result.signature, keep=keep)
    lowering, more = lower_to(destination("onnx"), subject)
    return replace(result, lowering=lowering), found + more
