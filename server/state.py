"""What the server knows about one open document.

A document is in one ``Mode`` at a time; ``DocumentState.enter`` is the one place
that changes it, and it logs each change with its reason (as esbonio's
``_set_state`` does), so a document's story can be read from the server's log. The
result shown and what was built from it are dropped together by ``drop_result``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types

from exportlens.core.fixes.verified import Offered
from exportlens.core.model.results import Diagnostic, FileResult

log = logging.getLogger(__name__)


class Mode(enum.Enum):
    """What a document's ``result`` is."""

    IDLE = "idle"  # nothing yet, or a file that declares no target and that no target runs
    MODEL = "model"  # declares targets: its export's result, or a notice says why it has none
    VIEW = "view"  # declares none: the view of the targets that import it (``open_modules``)
    PYPROJECT = "pyproject"  # a pyproject.toml: its declarations' problems (``pyproject_view``)


@dataclass(frozen=True)
class Published:
    """A diagnostic as the client was sent it (its ``data`` names it by ``id``), and
    the result's diagnostic it was made from (code actions compute fixes from that)."""

    id: str
    lsp: types.Diagnostic
    found: Diagnostic


@dataclass
class DocumentState:
    uri: str
    path: str
    version: int | None = None
    # The last result published for this document, and what it was made from.
    result: FileResult | None = None
    result_lines: list[str] = field(default_factory=list)
    result_version: int | None = None
    result_id: str | None = None  # for pull diagnostics: changes with every publish
    published: list[Published] = field(default_factory=list)
    from_cache: bool = False
    from_store: bool = False  # the shared cache served it (``from_cache`` too)
    # The hover index for ``result``, built off the hot path; None until built.
    index: Any = None
    hints: Any = None  # the inlay hints for ``result`` (features/hints.HintIndex), built with ``index``
    index_task: asyncio.Future[None] | None = None  # the asyncio.Task building ``index``; a hover may wait for it
    mode: Mode = Mode.IDLE  # changed by ``enter`` alone
    # The token key of the text ``result`` was made from (None: it reads its own
    # source, or does not tokenize), for the result it was computed for.
    result_tokens: tuple[FileResult, str | None] | None = None
    failure: str | None = None  # the last export's own failure (not a diagnostic), for status
    # The notice it shows instead of a result: ``untrusted-folder`` (its folder is not
    # trusted) or ``unsupported-torch`` (the environment's torch is outside the range).
    notice: Diagnostic | None = None
    # The verified fixes of ``fixes_for`` (the result they were verified for: they hold
    # only while it is ``result``), and the task verifying them (``verification``).
    fixes: list[Offered] = field(default_factory=list)
    fixes_for: FileResult | None = None
    fixing: asyncio.Future[None] | None = None

    @property
    def declares(self) -> bool:
        """The buffer declares targets (else nothing is exported)."""
        return self.mode is Mode.MODEL

    @property
    def view(self) -> bool:
        return self.mode is Mode.VIEW

    @property
    def pyproject(self) -> bool:
        return self.mode is Mode.PYPROJECT

    def enter(self, mode: Mode, why: str) -> None:
        """The one place a document's mode changes; each change is logged with ``why``."""
        if mode is not self.mode:
            log.info("%s: %s -> %s (%s)", self.uri, self.mode.value, mode.value, why)
            self.mode = mode

    def drop_result(self) -> None:
        """Show no result: drop it with what was built from it (its index and hints)."""
        self.result, self.index, self.hints, self.from_cache, self.from_store = None, None, None, False, False

    def line_unchanged(self, current: list[str], line: int) -> bool:
        """Whether 0-based ``line`` of the buffer (``current``) is still the text the
        result was made from: only then do the result's columns and nodes for that
        line number hold (hover, hints, lenses and the graph view all ask this)."""
        return 0 <= line < len(current) and line < len(self.result_lines) and current[line] == self.result_lines[line]

    @property
    def targets(self) -> list[dict[str, Any]]:
        if self.result is None:
            return []
        return [
            {"name": t.name, "line": t.line, "status": t.status, "export_ms": t.export_ms}
            for t in self.result.targets
        ]
