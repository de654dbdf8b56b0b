"""``exportlens check --save-onnx DIR``: write each target's lowered ONNX model.

The job process lowers and serializes (it has torch and onnx); the CLI, torch-free,
only writes the bytes the result carries, atomically (a temporary file in DIR, then a
rename, so a reader never sees half a model). One file per target that lowered --
also when its outputs differ, since that model is the one to inspect -- named
``<module>.<target>.onnx`` after the model file's path relative to the current folder
(``models/counter.py`` -> ``models.counter.Counter.onnx``), so targets of different
files never collide.
"""

from __future__ import annotations

import os
import re

from exportlens.core.cache.atomic import write_atomic
from exportlens.core.model.results import FileResult

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def onnx_file_name(path: str, target: str, cwd: str | None = None) -> str:
    cwd = cwd or os.getcwd()
    rel = os.path.relpath(path, cwd)
    if rel.startswith(".."):
        rel = os.path.abspath(path).lstrip(os.sep)
    stem = os.path.splitext(rel)[0].replace(os.sep, ".")
    return _UNSAFE.sub("_", f"{stem}.{target}") + ".onnx"


def save_models(results: list[FileResult], folder: str) -> list[str]:
    """Write every lowered model in ``results`` under ``folder`` (created); the paths written."""
    written = []
    for result in results:
        for target in result.targets:
            lowering = target.lowering
            if lowering is None or lowering.format != "onnx" or not lowering.model:
                continue
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, onnx_file_name(result.path, target.name))
            write_atomic(path, lowering.model, durable=True)
            written.append(path)
    return written
