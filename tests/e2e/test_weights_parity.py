"""Fake weights change no result: every bundled example, every ExportDB example and the
real-project corpora, checked with real weights and with every tensor a module's
construction makes built fake (``EXPORTLENS_FAKE_MIN_BYTES=0``), report the same
statuses, specs, dtypes, shapes, ranges and diagnostics at the same lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch._export.db.examples as exportdb

from tests.conftest import EXAMPLES, ROOT, check_json

CORPUS = ROOT / "tests" / "corpus"
TREES = {
    "examples": EXAMPLES,
    "exportdb": Path(exportdb.__file__).parent,
    **{f"corpus/{p.name}": p for p in sorted(CORPUS.iterdir()) if p.is_dir()},
}
EVERYTHING_FAKE = {"EXPORTLENS_FAKE_MIN_BYTES": "0"}


def _by_file(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["path"]: f for f in doc["files"]}


# What an out-of-memory diagnostic adds when the user chose real weights: the setting
# that would have avoided it.
SUGGESTION = '\nthe model was built with real weights (weights = "real")'


def _comparable(entry: dict[str, Any]) -> dict[str, Any]:
    """A file's report without what may differ: the weights, how long it took, the
    suggestion to build without real weights, and the check run on the example inputs
    (never made with fake weights: skipped)."""
    targets = [{k: v for k, v in t.items() if k not in ("weights", "weights_note", "export_ms", "run")} for t in entry["targets"]]
    diagnostics = [{**d, "message": d["message"].split(SUGGESTION)[0]} for d in entry["diagnostics"]]
    return {"diagnostics": diagnostics, "targets": targets}


@pytest.mark.slow
@pytest.mark.parametrize("tree", sorted(TREES))
def test_fake_weights_give_the_real_weights_report(tree: str) -> None:
    path = str(TREES[tree])
    _, real = check_json(path, extra=("--no-cache", "--weights", "real"))
    _, fake = check_json(path, extra=("--no-cache", "--weights", "auto"), env=EVERYTHING_FAKE)
    real_files, fake_files = _by_file(real), _by_file(fake)
    assert sorted(fake_files) == sorted(real_files)
    for name, entry in fake_files.items():
        assert _comparable(entry) == _comparable(real_files[name]), name
    weights = [t.get("weights") for f in fake_files.values() for t in f["targets"]]
    # The comparison means something: models were built fake (those with weights at all).
    assert "fake" in weights, weights
    assert all(t.get("weights") in ("real", None) for f in real_files.values() for t in f["targets"])
