"""Paths in keys and stored results, written the same on every machine. Torch-free.

A result made in one checkout must be found from another checkout of the same
commit at another path, by another user, on another machine with the same
environment (``exportlens.core.cache.remote`` shares them). So nothing absolute
goes into a key or a cache file: every path under one of a few folders -- the
project root, the interpreter's prefix (a virtual environment), its base prefix
(the standard library) and the user's site folder -- is written as a token for the
folder plus the rest (``\\x00root\\x00/models/mlp.py``), in keys, manifests and in
every string of a stored result (its paths, diagnostics, related locations, torch's
messages and stack traces, graph code, and the strings inside each program's
bytes); the reading side puts its own folders back. The longest folder is taken
first (a virtual environment inside the project is the environment's). A folder
matches only whole (``/a/proj`` is not a prefix of ``/a/proj2``). A path outside
them all stays absolute: it only matches on a machine where it is the same.
"""

from __future__ import annotations

import functools
import os
import re
import site
import sys
from typing import Any

import msgpack

from exportlens.core.serde import schema as S
from exportlens.core.serde.codec import unpack

ROOT = "\x00root\x00"
PREFIX = "\x00prefix\x00"
BASE = "\x00base\x00"
USER = "\x00user\x00"
_TOKEN = re.compile("\x00(?:root|prefix|base|user)\x00")


def _user_base() -> str | None:
    try:
        return site.getuserbase()
    except Exception:  # noqa: BLE001 - no home folder
        return None


class Places:
    """The folders of this machine for a project at ``root`` (None: no root, so a
    path under it stays absolute)."""

    def __init__(self, root: str | None) -> None:
        folders = [(ROOT, root), (PREFIX, sys.prefix), (BASE, sys.base_prefix), (USER, _user_base())]
        self.folders: dict[str, str] = {}  # token -> the folder this side reads as
        spellings: dict[str, str] = {}  # a spelling of a folder -> its token
        for token, folder in folders:
            if not folder or not os.path.isabs(folder):
                continue
            real = os.path.realpath(folder)
            self.folders.setdefault(token, real)
            for spelt in (os.path.abspath(folder), real):
                if spelt != os.sep:
                    spellings.setdefault(spelt.rstrip(os.sep), token)
        ordered = sorted(spellings, key=len, reverse=True)
        self._spellings = spellings
        self._pattern = re.compile("|".join(re.escape(s) + r"(?![\w.\-])" for s in ordered)) if ordered else None

    def portable(self, text: str) -> str:
        """``text`` with each folder written as its token."""
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda m: self._spellings[m.group(0)], text)

    def local(self, text: str) -> str:
        """``text`` with each token written as this side's folder; ValueError when
        it names a folder this side has not (a root-relative path and no root)."""
        if "\x00" not in text:
            return text
        return _TOKEN.sub(lambda m: self._folder(m.group(0)), text)

    def _folder(self, token: str) -> str:
        folder = self.folders.get(token)
        if folder is None:
            raise ValueError(f"no folder for {token.strip(chr(0))} on this side")
        return folder

    def portable_plain(self, data: Any) -> Any:
        """A result's plain form (``exportlens.core.model.plain``) made portable."""
        return _walk(data, self.portable)

    def local_plain(self, data: Any) -> Any:
        """A stored result's plain form with this side's folders put back."""
        return _walk(data, self.local)


@functools.lru_cache(maxsize=64)
def places_for(root: str | None) -> Places:
    """The folders paths are written relative to, for a project at ``root`` (one
    ``Places`` per root and process: the interpreter's folders do not move)."""
    return Places(root)


_SCALARS = frozenset((int, float, bool, type(None)))


def _walk(data: Any, convert: Any, key: str | None = None) -> Any:
    """``data`` with ``convert`` applied to every string in it. What nothing changed
    in is returned as it is, not copied (a program's table of ~300,000 values, mostly
    numbers, converted back in an editor opening a 70B model from the store: copying
    and comparing it was half of the ~0.3 s the lookup took)."""
    if isinstance(data, str):
        return convert(data)
    if isinstance(data, dict):
        out: dict[Any, Any] | None = None
        for k, v in data.items():
            new = _walk(v, convert, k if isinstance(k, str) else None)
            if new is not v:
                if out is None:
                    out = dict(data)
                out[k] = new
        return data if out is None else out
    if isinstance(data, list):
        changed: list[Any] | None = None
        for i, v in enumerate(data):
            if v.__class__ in _SCALARS:
                continue
            new = _walk(v, convert)
            if new is not v:
                if changed is None:
                    changed = list(data)
                changed[i] = new
        return data if changed is None else changed
    if isinstance(data, bytes) and key == "program" and data:
        return _program(data, convert)
    return data


def _program(data: bytes, convert: Any) -> bytes:
    """A program's bytes (``exportlens.core.serde``) with every string converted; the
    bytes unchanged when nothing in them is (or when they do not decode: the reader
    of the program reports that)."""
    try:
        doc = unpack(data)
    except ValueError:
        return data
    if not isinstance(doc, dict) or not isinstance(doc.get(S.P_STRINGS), list):
        return data
    changed = _walk(doc, convert)
    if changed is doc or changed == doc:
        return data
    return msgpack.packb(dict(sorted(changed.items())), use_bin_type=True)
