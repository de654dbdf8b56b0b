"""The user's files of one run: the declaring file and the local modules it imports.

A real project keeps its model classes in their own modules (``pkg/model.py``) and
declares targets elsewhere. A frame, an attribute definition or a ``return`` in such a
module is the user's code as much as one in the declaring file, so every line
exportlens reports is looked up here: the innermost frame in *any* of the user's
files wins, and its line carries the module's path (``SourceLine.path``). Files of
installed packages (torch, transformers) and of exportlens itself are never the
user's: their lines would point at code the user cannot fix. Torch-free.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from exportlens.core.model.signature import SourceLine
from exportlens.core.source.frames import Frame
from exportlens.core.source.sourcemap import SourceIndex
from exportlens.core.source.spans import statement_at

_INSTALLED = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
# exportlens.core's folder: its frames (the job, the loader) wrap every export.
_OWN = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep


def _real(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


class UserSources:
    """The declaring file's index, and every local module's, built on first use."""

    def __init__(self, main: SourceIndex, root: str | None, texts: Mapping[str, str] | None = None) -> None:
        self.main = main
        self.main_path = _real(main.path)
        self.root = _real(root) + os.sep if root else None
        self._indexes: dict[str, SourceIndex] = {self.main_path: main}
        self._user: dict[str, bool] = {}
        # real path -> the text a local module ran from when it is not the disk's (an
        # editor's unsaved buffer): its lines are that text's.
        self.texts = dict(texts or {})

    def is_user(self, filename: str) -> bool:
        """A ``.py`` file under the project root, outside installed packages."""
        known = self._user.get(filename)
        if known is not None:
            return known
        real = _real(filename)
        user = real == self.main_path or (
            self.root is not None
            and real.endswith(".py")
            and real.startswith(self.root)
            and not real.startswith(_OWN)
            and not any(part in real for part in _INSTALLED)
            and os.path.isfile(real)
        )
        self._user[filename] = user
        return user

    def index(self, filename: str) -> SourceIndex:
        """The file's index; lines of a module other than the declaring file carry its path."""
        real = _real(filename)
        found = self._indexes.get(real)
        if found is None and real in self.texts:
            found = self._indexes[real] = SourceIndex.build(self.texts[real], real, origin=real)
        if found is None:
            try:
                # utf-8-sig: as Python reads source, a BOM is no character of line 1 (ast refuses it)
                with open(real, encoding="utf-8-sig", errors="replace") as f:
                    text = f.read()
            except OSError:
                text = ""
            found = self._indexes[real] = SourceIndex.build(text, real, origin=real)
        return found

    def indexes(self) -> list[SourceIndex]:
        """Every index built so far, the declaring file's first."""
        return list(self._indexes.values())

    def deepest(self, frames: Iterable[Frame]) -> Frame | None:
        """The innermost frame in one of the user's files (frames run outermost first)."""
        found = None
        for f in frames:
            if self.is_user(f.file):
                found = f
        return found

    def statement(self, frame: Frame) -> SourceLine:
        """The frame's whole statement, in the file it is in."""
        return statement_at(self.index(frame.file), frame.line)

    def path_of(self, where: SourceLine | None) -> str:
        """The real path a line is in."""
        return where.path if where is not None and where.path else self.main_path
