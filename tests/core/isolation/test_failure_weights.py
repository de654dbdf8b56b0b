"""An out-of-memory job's message says why its weights were real -- the weights
package's answer (``real_weights_note``) -- and says nothing of weights when they may
have been fake; a crash is run again with real weights only where they may have been
fake (``retry_after_crash``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from exportlens.core.export.weights import retry_after_crash, with_real_weights
from exportlens.core.isolation.failure import Failure, failure_diagnostic
from exportlens.core.model.request import ExportRequest, Limits

REQUEST = ExportRequest(id=1, path="/nowhere/model.py", root="/nowhere", limits=Limits(timeout_s=60, memory_mb=512))
OOM = Failure("out-of-memory", "model")


def test_out_of_memory_with_weights_real_says_auto_would_build_them_without_values() -> None:
    message = failure_diagnostic(replace(REQUEST, weights="real"), OOM, None).message
    assert message.splitlines()[1] == (
        'the model was built with real weights (weights = "real"): with weights = "auto" '
        "(--weights auto) exportlens builds its large tensors without values, which the export never reads"
    )


def test_out_of_memory_after_a_fallback_says_why_the_weights_were_real() -> None:
    request = with_real_weights(REQUEST, "`model.py:7` needs the values of a large tensor")
    assert (request.weights, request.why_real) == ("real", "`model.py:7` needs the values of a large tensor")
    message = failure_diagnostic(request, OOM, None).message
    assert message.splitlines()[1] == "exportlens built the model with real weights because `model.py:7` needs the values of a large tensor"


def test_out_of_memory_with_weights_auto_says_nothing_of_weights() -> None:
    message = failure_diagnostic(REQUEST, OOM, None).message
    assert "weights" not in message and len(message.splitlines()) == 1


@pytest.mark.parametrize(("weights", "again"), [("auto", True), ("real", False)])
def test_a_crash_is_run_again_with_real_weights_only_where_they_may_have_been_fake(weights: str, again: bool) -> None:
    assert retry_after_crash(replace(REQUEST, weights=weights)) is again
