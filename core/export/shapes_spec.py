"""A malformed ``dynamic_shapes`` points at where it is declared. Torch-free.

torch checks the structure of ``dynamic_shapes`` against the inputs before tracing
(a dict for a tuple input, a wrong argument name, a count that does not match) and
raises ``UserError(INVALID_INPUT)`` from its own code: no frame of the user's is
in the traceback, so the line to fix is read off the source instead. That is the
``dynamic_shapes=`` keyword in the target's own declaration (the decorator), else
the module's ``dynamic_shapes = ...`` assignment (the globals form).
"""

from __future__ import annotations

import ast

from exportlens.core.export.analyze import ErrorFacts
from exportlens.core.model.signature import SourceLine
from exportlens.core.source.sourcemap import SourceIndex
from exportlens.core.source.spans import span


def malformed(facts: ErrorFacts) -> bool:
    """torch refused the ``dynamic_shapes`` themselves, before tracing the model."""
    first = facts.message.strip().split("\n", 1)[0]
    return facts.error_type == "INVALID_INPUT" and "dynamic_shapes" in first


def declaration(index: SourceIndex, within: tuple[int, int] | None) -> SourceLine | None:
    """The ``dynamic_shapes=`` keyword within the target's lines, else the module-level
    ``dynamic_shapes`` assignment; None when neither is in the file."""
    if within is not None:
        try:
            tree = ast.parse(index.text)
        except (SyntaxError, ValueError, RecursionError):
            return None
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "dynamic_shapes" and within[0] <= node.lineno <= within[1]:
                return span(node)
    return index.global_assignments.get("dynamic_shapes")
