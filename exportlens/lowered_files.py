"""``exportlens check --save-onnx DIR`` / ``--save-pte DIR``: write each target's lowered program.

The job process lowers and serializes (it has torch and the format's packages); the
CLI, torch-free, only writes the bytes the result carries, atomically (a temporary
file in DIR, then a rename, so a reader never sees half a program). One file per
target that lowered -- also when its outputs differ, since that program is the one to
inspect -- named ``<module>.<target>.<suffix>`` after the model file's path relative to
the current folder (``models/counter.py`` -> ``models.counter.Counter.onnx``), so
targets of different files never collide. A target whose program was not made says
why (``skipped``: built with fake weights), so a missing file is never a silent one.
"""

from __future__ import annotations

import os
import re

from exportlens.core.disk.atomic import write_atomic
from exportlens.core.model.results import FileResult

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
SUFFIXES = {"onnx": ".onnx", "executorch": ".pte"}


def program_file_name(path: str, target: str, suffix: str, cwd: str | None = None) -> str:
    cwd = cwd or os.getcwd()
    rel = os.path.relpath(path, cwd)
    if rel.startswith(".."):
        rel = os.path.abspath(path).lstrip(os.sep)
    stem = os.path.splitext(rel)[0].replace(os.sep, ".")
    return _UNSAFE.sub("_", f"{stem}.{target}") + suffix


def save_programs(results: list[FileResult], folder: str, format: str) -> tuple[list[str], list[str]]:
    """Write every program lowered to ``format`` in ``results`` under ``folder``
    (created): the paths written, and a line per target lowered on purpose without one."""
    written, not_made = [], []
    for result in results:
        for target in result.targets:
            lowering = target.lowering(format)
            if lowering is None:
                continue
            if not lowering.model:
                if lowering.skipped:
                    not_made.append(f"{target.name} ({os.path.relpath(result.path)}): no {SUFFIXES[format]} written: {lowering.skipped}")
                continue
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, program_file_name(result.path, target.name, SUFFIXES[format]))
            write_atomic(path, lowering.model, durable=True)
            written.append(path)
    return written, not_made
