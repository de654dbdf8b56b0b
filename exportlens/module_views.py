"""``check``/``show`` on a model module: the targets that exercise it.

A file named to ``check`` that declares no target but is a local module of the
project (``pkg/model.py``) is checked through the files that do: the project's
model files are exported (or taken from the cache) as usual, and the module's
result is the view of those whose run imported it (``exportlens.core.model.views``):
each diagnostic at its own line, each target's signature with the module's lines.
Torch-free, like the rest of the CLI.
"""

from __future__ import annotations

from exportlens.core.model.results import FileResult
from exportlens.core.model.views import view_for
from exportlens.core.pipeline import Batch, Pipeline, RunListener
from exportlens.core.project.files import declares_targets, root_of, survey


def _declares(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return declares_targets(path, f.read())
    except OSError:
        return True  # unreadable: checked as a file, which says so


def run_with_views(pipeline: Pipeline, files: list[str], jobs: int | None, listener: RunListener | None = None) -> Batch:
    """``pipeline.run(files)``, where each file that declares nothing gets, added to
    its own result, the view of the project's model files that import it."""
    modules = [f for f in files if f.endswith(".py") and not _declares(f)]
    extra: list[str] = []
    for root in dict.fromkeys(root_of(m) for m in modules):
        extra += [f for f in survey([root]).files if f not in files and f not in extra]
    batch = pipeline.run([*files, *extra], jobs, listener=listener)
    if not modules:
        return batch
    shown = set(files)
    by_path = {r.path: r for r in batch.results}
    results: list[FileResult] = []
    for r in batch.results:
        if r.path not in shown:
            continue  # exported only to see what it does to a module
        if r.path in modules:
            view = view_for(r.path, [x for p, x in by_path.items() if p != r.path])
            r = FileResult(
                path=r.path,
                diagnostics=r.diagnostics + view.diagnostics,
                targets=r.targets + view.targets,
                local_imports=r.local_imports,
                local_import_hashes=r.local_import_hashes,
            ).sorted()
        results.append(r)
    # Batch counts hits over every file it ran; the summary speaks of the shown ones.
    return Batch(results, min(batch.hits, len(results)))
