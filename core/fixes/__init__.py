"""Quick fixes: edits that remove a diagnostic, computed from the source text and the
result, without torch and without the LSP.

One module per family of fixes; each offers a fix only where it can show the edit
is right (the conditions are in each module's docstring, and each was checked by
exporting the edited model with real torch). ``fixes_for`` is the one entry point:
the language server's ``textDocument/codeAction`` turns its ``Fix``es into LSP edits.
"""

from __future__ import annotations

from exportlens.core.fixes import buffers, dims, eval_mode, hf_cache, inplace, no_grad
from exportlens.core.fixes.model import Fix, TextEdit, apply, parses
from exportlens.core.model.results import Diagnostic, FileResult

# The codes a fix exists for (docs/diagnostics.md says which).
FIXABLE = frozenset(
    {
        "banned-mutation/tensor-attribute",
        "constraint-violation",
        "unsupported-type",
        "banned-mutation/input-metadata",
        "banned-mutation/parameter",
        "training-mode",
    }
)


def fixes_for(source: str, diagnostic: Diagnostic, result: FileResult) -> list[Fix]:
    """The fixes for ``diagnostic`` of ``result`` in ``source`` (the text the result was
    made from, of the file the diagnostic's line is in). Each fix's edits leave a file
    that still parses."""
    if diagnostic.code not in FIXABLE:
        return []
    if diagnostic.code == "banned-mutation/tensor-attribute":
        found = buffers.fixes(source, diagnostic, result)
    elif diagnostic.code == "constraint-violation":
        found = dims.fixes(source, diagnostic)
    elif diagnostic.code == "unsupported-type":
        found = hf_cache.fixes(source, diagnostic, result)
    elif diagnostic.code == "banned-mutation/parameter":
        found = no_grad.fixes(source, diagnostic)
    elif diagnostic.code == "training-mode":
        found = eval_mode.fixes(source, diagnostic)
    else:
        found = inplace.fixes(source, diagnostic)
    return [f for f in found if parses(apply(source, f.edits))]


__all__ = ["FIXABLE", "Fix", "TextEdit", "apply", "fixes_for"]
