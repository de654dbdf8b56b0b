"""``check``/``show`` on a model module: the targets that exercise it.

A file named to ``check`` that declares no target but is a local module of the
project (``pkg/model.py``) is checked through the files that do: the project's
model files that may import it (``exportlens.core.project.importers``, as the
server asks) are exported (or taken from the cache) as usual, and the module's
result is the view of those whose run imported it (``exportlens.core.model.views``):
each diagnostic at its own line, each target's signature with the module's lines.
Torch-free, like the rest of the CLI.
"""

from __future__ import annotations

from exportlens.core.model.results import Diagnostic, FileResult
from exportlens.core.model.views import view_for
from exportlens.core.pipeline import Batch, Pipeline, RunListener
from exportlens.core.project.files import declares_targets
from exportlens.core.project.importers import model_files_importing


def _declares(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return declares_targets(path, f.read())
    except OSError:
        return True  # unreadable: checked as a file, which says so


def _same(d: Diagnostic) -> tuple[object, ...]:
    """What makes two diagnostics the same finding, whichever run found it."""
    return (d.code, d.line, d.column, d.end_line, d.end_column, d.message, d.target)


def run_with_views(pipeline: Pipeline, files: list[str], jobs: int | None, listener: RunListener | None = None) -> Batch:
    """``pipeline.run(files)``, where each file that declares nothing gets, added to
    its own result, the view of the project's model files that import it."""
    modules = [f for f in files if f.endswith(".py") and not _declares(f)]
    extra: list[str] = []
    for module in modules:  # only those that may import it, as the server asks (``importers``)
        extra += [f for f in model_files_importing(module) if f not in files and f not in extra]
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
            own = {_same(d) for d in r.diagnostics}
            r = FileResult(
                path=r.path,
                # The module's own run says its syntax error (or failed import) too.
                diagnostics=r.diagnostics + tuple(d for d in view.diagnostics if _same(d) not in own),
                targets=r.targets + view.targets,
                local_imports=r.local_imports,
                local_import_hashes=r.local_import_hashes,
            ).sorted()
        results.append(r)
    # Batch counts hits over every file it ran; the summary speaks of the shown ones.
    return Batch(results, min(batch.hits, len(results)), frozenset(p for p in batch.from_store if p in shown), frozenset(p for p in batch.cached if p in shown))
