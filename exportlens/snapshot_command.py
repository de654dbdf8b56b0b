"""``exportlens snapshot``: export the targets under the PATHs and record their
signatures in each project's ``exportlens.snapshot.json``.

The export is ``check``'s (the same pipeline, cache and options) without the
comparison; what is recorded, kept and dropped is ``exportlens.core.contract.record``'s
rule. One line per snapshot says what changed, so a CI log or a terminal shows
whether the commit needs the file. Torch-free.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import ContextManager

from exportlens.core.contract.check import under
from exportlens.core.contract.record import Update, update
from exportlens.core.contract.snapshot import Snapshot, SnapshotError, read, snapshot_path, write
from exportlens.core.model.results import FileResult
from exportlens.core.pipeline import Pipeline, RunListener
from exportlens.core.project.files import root_of
from exportlens.report import display_path, format_text


def record(paths: list[str], files: list[str], pipeline: Pipeline, jobs: int | None, progress: ContextManager[RunListener | None] | None = None) -> int:
    """Export ``files`` (found under ``paths``) and update the snapshots; the exit code.
    ``progress``: the progress line shown while the exports run."""
    with progress or contextlib.nullcontext() as listener:
        results = pipeline.run(files, jobs, compare=False, listener=listener).results
    text = format_text(results, signatures=False)
    if text:
        print(text)
    status = 1 if any(r.has_errors for r in results) else 0
    scopes = [os.path.abspath(p) for p in paths]
    by_root: dict[str, list[FileResult]] = {}
    for scope in scopes:  # a project whose model files are all gone still gets its update
        by_root.setdefault(root_of(scope if os.path.isfile(scope) else os.path.join(scope, "_")), [])
    for result in results:
        by_root.setdefault(root_of(result.path), []).append(result)
    for root, found in sorted(by_root.items()):
        status = max(status, _record_root(root, found, scopes))
    sys.stdout.flush()
    return status


def _record_root(root: str, results: list[FileResult], scopes: list[str]) -> int:
    path = snapshot_path(root)
    shown = display_path(path)
    try:
        old = read(path)
    except SnapshotError as e:
        if not any(under(root, scope) for scope in scopes):
            # Writing it from this run alone would lose the entries of the other files.
            print(f"exportlens: {shown}: {e}; not written: run `exportlens snapshot` over the whole project to write it anew", file=sys.stderr)
            return 1
        print(f"exportlens: {shown}: {e}; writing it anew", file=sys.stderr)
        old = Snapshot()
    if old is None:
        if not any(r.targets for r in results):
            return 0  # nothing to record, and no file to update: create none
        old = Snapshot()
    upd = update(old, root, results, scopes)
    written = write(path, upd.snapshot)
    print(_report(shown, upd, written))
    for label in upd.kept:
        print(f"exportlens: {label} was not exported; its recorded signature is kept as it was", file=sys.stderr)
    return 0


def _report(shown: str, upd: Update, written: bool) -> str:
    count = sum(len(t) for t in upd.snapshot.files.values())
    head = f"{shown}: {count} target{'s' * (count != 1)} recorded"
    if not written:
        return head + ", unchanged"
    parts = [f"{what}: {', '.join(labels)}" for what, labels in (("added", upd.added), ("changed", upd.changed), ("removed", upd.removed)) if labels]
    return head + (f" ({'; '.join(parts)})" if parts else "")
