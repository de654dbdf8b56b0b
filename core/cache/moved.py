"""The comment-moved lookup: a stored result served again, its lines moved, when
only comments or blank lines changed (in the file or in a local module it imports).
Torch-free; the store (``store.py``) reads and writes the files.

A third file, the *tokens manifest*, is keyed like the manifest but by the file's
tokens without comments and blank lines (``exportlens.core.source.tokens``) instead
of its bytes, and keeps the text the result was made from, and the state and text
of each local module the export imported. A lookup whose bytes (or a module's) miss
tries it: when only comments or blank lines changed, in the file or in its modules,
the stored result is served with every line moved to the new text
(``exportlens.core.cache.remap``), and no export runs. A file (or a local module it
imports) that can see its own source or line numbers gets no tokens manifest: only
its exact bytes reuse a result.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import replace
from typing import Any, Callable

from exportlens.core.cache.entry_file import KIND_TOKENS, CorruptEntry, encode_file, listed_libraries
from exportlens.core.cache.keys import second_key, token_first_key
from exportlens.core.cache.portable import Places, places_for
from exportlens.core.cache.remap import FileMap, moved_modules, remap
from exportlens.core.disk.states import ABSENT
from exportlens.core.model.plain import pack
from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import FileResult
from exportlens.core.source.tokens import line_map, reads_own_source, tokens_of

log = logging.getLogger("exportlens.cache")


def tokens_key(request: ExportRequest, source: bytes) -> str | None:
    """The key of ``source``'s tokens manifest; None when it has none: its tokens
    do not read, or it can see its own source or line numbers."""
    tokens = tokens_of(source)
    if tokens is None or tokens.introspects:
        return None
    return token_first_key(request, tokens.key)


def moved_result(request: ExportRequest, source: bytes, found: Any, entry: Callable[[str], FileResult | None]) -> tuple[FileResult, str] | None:
    """The result of a text with the same tokens (only comments or blank lines
    differ), its lines moved to ``source``, and the key of the entry it came from;
    None when there is none or it cannot be moved soundly. ``found``: the tokens
    manifest read at ``tokens_key``; ``entry``: the stored result of a second key.
    Raises :class:`CorruptEntry` for a malformed tokens manifest."""
    key1, deps, old = found.get("key1"), found.get("deps"), found.get("source")
    states, texts = found.get("states"), found.get("texts")
    libraries = listed_libraries(found)
    if not (isinstance(key1, str) and isinstance(old, bytes) and isinstance(deps, list) and all(isinstance(d, str) for d in deps)) or libraries is None:
        raise CorruptEntry("bad tokens manifest")
    places = places_for(request.root)
    try:
        deps, libraries = [places.local(p) for p in deps], [places.local(p) for p in libraries]
    except ValueError:
        return None
    if any(path in deps for path, _ in request.overlays):
        return None  # a module it imports is unsaved in the editor: its lines are the buffer's, not a stored text's
    maps: list[FileMap] = []
    if old != source:
        lines = line_map(old, source)
        if lines is None:
            return None
        maps.append(FileMap(request.path, old, lines))
    now_states: list[str] | None = None
    if isinstance(states, list) and isinstance(texts, list) and len(states) == len(texts) == len(deps):
        moved = moved_modules(deps, states, texts)
        if moved is None:
            return None
        maps += moved[0]
        now_states = moved[1]
        key2 = second_key(key1, deps, states, libraries=libraries, places=places)
    else:  # modules kept by their bytes alone (the export's states were not known)
        key2 = second_key(key1, deps, libraries=libraries, places=places)
    if not maps:
        return None  # the same bytes missed by their own key (a bad or evicted file): a miss
    stored = entry(key2) if key2 is not None else None
    if stored is None or key2 is None:
        return None
    result = remap(stored, maps)
    if result is not None and now_states is not None and stored.local_imports == tuple(deps):
        result = replace(result, local_import_hashes=tuple(now_states))
    if result is None:
        log.debug("%s: the stored result's lines cannot be moved soundly; exporting", request.path)
        return None
    return result, key2


def tokens_file(request: ExportRequest, source: bytes, key1: str, deps: list[str], states: list[str] | None, libraries: list[str], places: Places) -> tuple[str, bytes] | None:
    """The tokens manifest to write (its key and file) when comment-only edits may
    reuse this result: neither the file nor a local module it ran spells a way to
    see its own source or line numbers. With the states the export saw, it also
    keeps each local module's text, so a module edited in comments only is served
    moved too. None when there is none to write."""
    tokens = tokens_of(source)
    if tokens is None or tokens.introspects:
        return None
    texts: list[bytes | None] = [None] * len(deps)
    for i, dep in enumerate(deps):
        if not dep.endswith(".py") or (states is not None and states[i] == ABSENT):
            continue
        try:
            with open(dep, "rb") as f:
                data = f.read()
        except OSError:
            return None
        if states is not None and hashlib.sha256(data).hexdigest() != states[i]:
            return None  # changed since the export read it: cannot tell what it spelled
        if reads_own_source(data):
            return None
        texts[i] = data
    key = token_first_key(request, tokens.key)
    payload: dict[str, Any] = {"key": key, "key1": key1, "deps": [places.portable(p) for p in deps], "libs": [places.portable(p) for p in libraries], "source": source}
    if states is not None:
        payload.update(states=states, texts=texts)
    data = encode_file(KIND_TOKENS, pack(payload))
    return key, data
