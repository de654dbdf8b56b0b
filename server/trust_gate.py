"""The server runs no code of a folder its user has not trusted.

Exporting a file runs it, so before any export, cache lookup, worker start or
preloading, the server asks :meth:`TrustGate.allows` about the file. A folder is
trusted when

- the user recorded it (``exportlens trust FOLDER``, or the command
  ``exportlens.trust``: ``exportlens.core.project.trust``, read afresh at each
  question, so a trust given from a terminal counts at the next open or save), or
- the client said its workspace is trusted: ``initializationOptions.trusted`` (or
  ``initializationOptions.exportlens.trusted``) is ``true`` at ``initialize``, as VS
  Code's extension says when VS Code's Workspace Trust trusts the workspace. That
  covers the workspace folders (every file, when the client named no folder).

An untrusted model file gets one information diagnostic (``untrusted-folder``) on
its first line, with a quick fix that runs ``exportlens.trust``, and its folder a
``window/showMessage`` once, naming both ways to trust it
(``exportlens.server.features.untrusted``).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable

from exportlens.core.project import trust
from exportlens.core.project.files import root_of

log = logging.getLogger(__name__)

OPTION = "trusted"  # initializationOptions.trusted / initializationOptions.exportlens.trusted


def client_trusts(options: Any) -> bool:
    """Whether ``initializationOptions`` say the workspace is trusted (exactly ``true``)."""
    if not isinstance(options, dict):
        return False
    inner = options.get("exportlens")
    return options.get(OPTION) is True or (isinstance(inner, dict) and inner.get(OPTION) is True)


class TrustGate:
    """What the server may run; ``warn`` reports an ignored trust record (once per text)."""

    def __init__(self, warn: Callable[[str], None]) -> None:
        self.warn = warn
        self.client_trusted = False
        self.folders: tuple[str, ...] = ()  # the workspace folders, resolved
        self.told: set[str] = set()  # the folders whose user was told how to trust them

    def start(self, folders: list[str], options: Any) -> None:
        """At ``initialize``: the workspace folders and the client's word."""
        self.folders = tuple(trust.resolve(f) for f in folders)
        self.client_trusted = client_trusts(options)
        if self.client_trusted:
            log.info("the client trusts its workspace: %s", ", ".join(self.folders) or "(no folder)")

    def record(self) -> trust.TrustRecord:
        record = trust.load()
        if record.problem is not None:
            self.warn(record.problem)
        return record

    def allows(self, path: str) -> bool:
        """Whether the server may run the code of ``path`` (a file or folder)."""
        if self.client_trusted:
            if not self.folders:
                return True
            resolved = trust.resolve(path)
            if any(trust.covers(folder, resolved) for folder in self.folders):
                return True
        return self.record().trusts(path)

    def folder_of(self, path: str) -> str:
        """The folder to trust for ``path``: the workspace folder holding it (the
        deepest), else its project root (the nearest pyproject.toml or .git)."""
        resolved = trust.resolve(path)
        holding = [f for f in self.folders if trust.covers(f, resolved)]
        if holding:
            return max(holding, key=len)
        return trust.resolve(root_of(resolved)) if not os.path.isdir(resolved) else resolved

    def trust(self, folder: str) -> str:
        """Record ``folder`` as trusted (``exportlens.trust``); the resolved folder.
        Raises ``trust.TrustError``."""
        return trust.trust(folder)
