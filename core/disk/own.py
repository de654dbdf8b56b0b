"""Where exportlens's own code lies: its packages' folders (a result never depends on
exportlens's files; the cache's fingerprint hashes them). Torch-free."""

from __future__ import annotations

import importlib.util
import os


def package_folders() -> list[tuple[str, str]]:
    """``(package name, folder)`` of ``exportlens``, ``exportlens.core`` and
    ``exportlens.server``. Found by spec, not imported: core must not import the
    packages above or beside it (``find_spec`` runs no module code; the parent
    ``exportlens`` is already imported, as the parent of this one always is)."""
    out = []
    for name in ("exportlens", "exportlens.core", "exportlens.server"):
        spec = importlib.util.find_spec(name)
        for folder in (spec.submodule_search_locations or []) if spec is not None else []:
            out.append((name, os.path.abspath(folder)))
    return out
