"""What ``exportlens snapshot`` writes: the project's snapshot updated from a run.

Only what the run covered changes. A checked file's entries become its exported
targets' signatures; a target whose export failed keeps the entry it had (its
signature is unknown, not gone), and so does every target of a file that did not
run (a syntax or import error). The snapshot's files under the given PATHs that were
not checked -- deleted, or declaring nothing now -- are dropped. Entries of files
outside the PATHs stay as they were.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from exportlens.core.contract.check import ran, under
from exportlens.core.contract.snapshot import Snapshot, TargetEntry, entry_of, file_key
from exportlens.core.model.results import FileResult


@dataclass
class Update:
    """The new snapshot and what changed, for the command's report."""

    snapshot: Snapshot
    added: list[str] = field(default_factory=list)  # "file.py: Name"
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # not exported this time: entry kept as it was


def update(old: Snapshot, root: str, results: list[FileResult], scopes: list[str]) -> Update:
    files: dict[str, dict[str, TargetEntry]] = {k: dict(v) for k, v in old.files.items()}
    upd = Update(Snapshot(files))
    checked = {file_key(root, r.path) for r in results}
    for key in sorted(files):
        path = os.path.normpath(os.path.join(root, key))
        if key not in checked and any(under(path, s) for s in scopes):
            upd.removed += [f"{key}: {name}" for name in sorted(files.pop(key))]
    for result in results:
        key = file_key(root, result.path)
        before = files.get(key, {})
        if not ran(result):
            upd.kept += [f"{key}: {name}" for name in sorted(before)]
            continue
        after: dict[str, TargetEntry] = {}
        for target in result.targets:
            if target.status == "ok" and target.signature is not None:
                after[target.name] = entry_of(target.signature)
            elif target.name in before:
                after[target.name] = before[target.name]
                upd.kept.append(f"{key}: {target.name}")
        for name in sorted(set(before) | set(after)):
            label = f"{key}: {name}"
            if name not in after:
                upd.removed.append(label)
            elif name not in before:
                upd.added.append(label)
            elif after[name] != before[name]:
                upd.changed.append(label)
        if after:
            files[key] = after
        else:
            files.pop(key, None)
    return upd
