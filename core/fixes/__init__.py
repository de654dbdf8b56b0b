"""Quick fixes: edits that remove a diagnostic, computed from the source text and the
result, without torch and without the LSP.

One module per family of fixes; each offers a fix only where it can show the edit
is right (the conditions are in each module's docstring, and each was checked by
exporting the edited model with real torch). ``fixes_for`` is the one entry point:
the language server's ``textDocument/codeAction`` turns its ``Fix``es into LSP edits.
"""

from __future__ import annotations

from collections.abc import Callable

from exportlens.core.fixes import (
    branches,
    buffers,
    checks,
    dim_suggestions,
    eval_mode,
    fake_kernel,
    hf_cache,
    inplace,
    no_grad,
    packed,
    pytrees,
    shape_keys,
    strict,
)
from exportlens.core.fixes.model import Fix, TextEdit, apply, parses
from exportlens.core.model.results import Diagnostic, FileResult

# Another user file's text by its real path (a class defined in a local module), or None.
Read = Callable[[str], "str | None"]

# The codes a fix exists for (docs/diagnostics.md says which); besides these, every
# error of a target declared ``strict=True`` gets ``strict.fixes``.
FIXABLE = frozenset(
    {
        "banned-mutation/tensor-attribute",
        "constraint-violation",
        "unsupported-type",
        "banned-mutation/input-metadata",
        "banned-mutation/parameter",
        "training-mode",
        "data-dependent",
        "export-error",
    }
)


def _family(source: str, diagnostic: Diagnostic, result: FileResult, read: Read | None) -> list[Fix]:
    code = diagnostic.code
    if code == "banned-mutation/tensor-attribute":
        return buffers.fixes(source, diagnostic, result)
    if code == "constraint-violation":
        return dim_suggestions.fixes(source, diagnostic)
    if code == "unsupported-type":
        return hf_cache.fixes(source, diagnostic, result) + pytrees.fixes(source, diagnostic, result, read)
    if code == "banned-mutation/parameter":
        return no_grad.fixes(source, diagnostic)
    if code == "training-mode":
        return eval_mode.fixes(source, diagnostic)
    if code == "banned-mutation/input-metadata":
        return inplace.fixes(source, diagnostic)
    if code == "data-dependent":
        return checks.fixes(source, diagnostic) + branches.fixes(source, diagnostic)
    if code == "export-error":
        return shape_keys.fixes(source, diagnostic) + fake_kernel.fixes(source, diagnostic, result, read) + packed.fixes(source, diagnostic)
    return []


def fixes_for(source: str, diagnostic: Diagnostic, result: FileResult, read: Read | None = None) -> list[Fix]:
    """The candidate fixes for ``diagnostic`` of ``result`` in ``source`` (the text the
    result was made from, of the file the diagnostic's line is in). Each fix's edits
    leave a file that still parses; whether it exports and keeps the model's outputs
    is ``core/fixes/verified``'s to find out."""
    found = _family(source, diagnostic, result, read) + strict.fixes(source, diagnostic)
    return [f for f in found if all(e.path is not None for e in f.edits) or parses(apply(source, [e for e in f.edits if e.path is None]))]


__all__ = ["FIXABLE", "Fix", "Read", "TextEdit", "apply", "fixes_for"]
