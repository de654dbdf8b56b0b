"""The two keys of the result cache (see :mod:`exportlens.core.cache.store`). Torch-free.

The first key covers everything known before a run: the file's path and bytes (bytes,
not text: a file may not decode), the request's settings, the pyproject targets the
job will use, and the environment (torch, Python, exportlens's own code). The second
adds the state of each file the run depended on, known only after a run: the bytes of
the local modules it imported and of the project files it read, and "absent" for the
local modules it looked for and did not find (a negative dependency: creating one
changes what the import finds); and the state of each library file the model's code
depended on (``unit_state``: a distribution's name, version and RECORD hash, or a
module file's bytes), so that upgrading or editing one invalidates its results.
Nothing in a key names a machine: no inode, device or time, only content, so two
machines with the same environment compute the same keys.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import importlib.metadata
import json
import os
import stat
import sys
from typing import Any

from exportlens.core.cache.portable import Places, places_for
from exportlens.core.disk.own import package_folders
from exportlens.core.disk.states import ABSENT, file_state, overlay_text_state, unit_state
from exportlens.core.model.lowering import PACKAGES
from exportlens.core.model.request import ExportRequest
from exportlens.core.project.settings import find_pyproject, pyproject_targets

# Moves whenever the layout of the cache files or of the key changes. (The program
# schema's SCHEMA_VERSION does not apply: results are stored in ``wire``'s plain form,
# whose shape is covered by the exportlens code fingerprint below.)
# 2: dependencies may be "absent" (negative) and include project files the model read.
# 3: a third kind of file, the tokens manifest (a result reused across comment edits).
# 4: the second key has the state of the installed libraries the model imported.
# 5: ... by content: each distribution's RECORD, each other library module's bytes.
# 6: no absolute path in keys or files (``exportlens.core.cache.portable``): results
#    are shared between checkouts and machines.
CACHE_FORMAT = 6

@functools.cache
def torch_version() -> str:
    """The installed torch's version, from its metadata: torch itself is never imported."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "none"


@functools.cache
def exportlens_version() -> str:
    """exportlens's version, from its metadata: core reads nothing from the package above it."""
    try:
        return importlib.metadata.version("exportlens")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@functools.cache
def code_fingerprint() -> str:
    """exportlens's version and the bytes of its own modules (every subpackage of
    ``exportlens``, ``exportlens.core`` and ``exportlens.server``), so a result made by
    other exportlens code (a development tree, a reinstall) is not reused."""
    h = hashlib.sha256(exportlens_version().encode())
    for package, top in package_folders():
        for name, path in _modules_under(top):
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            h.update(f"\x00{package}/{name}\x00{len(data)}\x00".encode() + data)
    return h.hexdigest()


def _modules_under(top: str) -> list[tuple[str, str]]:
    """``(path relative to top, path)`` of every ``.py`` file in the package folder and
    its subpackages, sorted (the top-level ``exportlens`` folder holds no subpackage of
    core or server: those are mapped from their own folders)."""
    out: list[tuple[str, str]] = []
    for directory, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if os.path.isfile(os.path.join(directory, d, "__init__.py")))
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                out.append((os.path.relpath(path, top), path))
    return sorted(out)


def lowering_versions(formats: tuple[str, ...]) -> list[str]:
    """The versions of the packages lowering to ``formats`` uses (``exportlens[onnx]``,
    ``exportlens[executorch]``), "none" for a missing one, from their metadata: none of
    them is imported here. Read every time (not cached like torch's): a user told to
    install the extra does so while the server runs, and the answer "install it" must
    not be served from the cache after."""
    out = []
    for name in [p for f in formats for p in PACKAGES.get(f, ())]:
        try:
            out.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{name} none")
    return out


def environment() -> list[Any]:
    """Everything outside the request that a result depends on. Nothing of the
    machine: not the interpreter's prefix (two checkouts' environments at other
    paths are the same environment; the libraries a result imported are in the
    second key by content, a module it found nowhere is looked for at lookup)."""
    return [CACHE_FORMAT, torch_version(), sys.version, code_fingerprint()]


def source_bytes(request: ExportRequest) -> bytes:
    """What the job will compile: the editor's text, else the file's bytes (raises
    OSError, also for a FIFO or a device, which reading could block on forever)."""
    if request.source is not None:
        return request.source.encode("utf-8", errors="surrogatepass")
    fd = os.open(request.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", request.path)
        return f.read()


def _targets_setting(request: ExportRequest, places: Places) -> list[Any]:
    """The pyproject targets the job will use: the request's, else the nearest pyproject's."""
    if request.pyproject_targets:
        return ["request", [places.portable(t) for t in request.pyproject_targets]]
    pyproject = find_pyproject(request.path, request.root)
    if not pyproject:
        return ["none"]
    entries, problem = pyproject_targets(pyproject)
    # Its bytes too: a result may hold diagnostics located in pyproject.toml (a
    # misspelt target's entry, its parse error), at lines any edit of it moves.
    # Entries and the problem name files by absolute path: written portable too.
    entries = [places.portable(e) for e in entries]
    return ["pyproject", places.portable(os.path.abspath(pyproject)), entries, problem and places.portable(problem), file_state(pyproject)]


def first_key(request: ExportRequest, source: bytes) -> str:
    """The manifest's key: everything except the local imports."""
    return _first_key(request, b"\x00source\x00" + hashlib.sha256(source).digest())


def token_first_key(request: ExportRequest, tokens: str) -> str:
    """The tokens manifest's key: as ``first_key``, with the file's token key
    (``exportlens.core.source.tokens``) in place of its bytes."""
    return _first_key(request, b"\x00tokens\x00" + tokens.encode())


def _first_key(request: ExportRequest, source: bytes) -> str:
    # The path as the project sees it (relative to its root): the same in every checkout.
    places = places_for(request.root)
    settings = [
        places.portable(os.path.abspath(request.path)),
        request.limits.timeout_s,
        request.limits.memory_mb,
        request.strict_default,
        sorted(request.skip),
        _targets_setting(request, places),
        environment(),
        # How weights are made; the size bound of fake tensors is a knob for tests.
        request.weights,
        os.environ.get("EXPORTLENS_FAKE_MIN_BYTES", ""),
        # Lowering: the formats, whether the model's bytes ride along, and the
        # converter's and runtime's versions (installing the extra changes the answer).
        *(
            [list(request.lower), list(request.keep_lowered), lowering_versions(request.lower), request.memory_budget]
            if request.lower
            else []
        ),
    ]
    h = hashlib.sha256(json.dumps(settings, sort_keys=True, default=repr).encode())
    h.update(source)
    return h.hexdigest()


def states_now(request: ExportRequest, deps: list[str]) -> list[str]:
    """Each dependency's state for ``request``: the state of its overlay text (a module
    open in the editor with unsaved text, which the job imports instead of the file),
    else the file's now ("" when it cannot be read: ``second_key`` then misses)."""
    overlays = {path: overlay_text_state(text) for path, text in request.overlays}
    return [overlays.get(dep) or file_state(dep) or "" for dep in deps]


def second_key(
    key1: str,
    deps: list[str],
    states: list[str] | None = None,
    libraries: list[str] | None = None,
    library_states: list[str] | None = None,
    places: Places | None = None,
) -> str | None:
    """The entry's key: the first key plus each dependency's state (``file_state``) --
    ``states`` when given (what the export read), else the files' states now -- and
    each library unit's (``unit_state``) -- ``library_states`` when given (what the
    export ran), else as they are now; None when one cannot be read or a given state
    is malformed (a miss). Paths are hashed as ``places`` writes them (portable)."""
    name = places.portable if places is not None else str
    h = hashlib.sha256(key1.encode())
    if states is not None and len(states) != len(deps):
        return None
    libraries = libraries or []
    if library_states is None:
        library_states = [unit_state(p) or "" for p in libraries]
    if len(library_states) != len(libraries):
        return None
    for path, lib_state in zip(libraries, library_states, strict=True):
        if not lib_state:
            return None  # gone: its results cannot be told apart from another version's
        h.update(b"\x00L" + name(path).encode("utf-8", errors="surrogatepass") + b"\x00" + lib_state.encode() + b"\x00")
    for i, dep in enumerate(deps):
        state = states[i] if states is not None else file_state(dep)
        h.update(b"\x00" + name(dep).encode("utf-8", errors="surrogatepass") + b"\x00")
        if state == ABSENT:
            h.update(b"A")  # tagged: a digest and "absent" never hash alike
            continue
        try:
            digest = bytes.fromhex(state or "")
        except ValueError:
            return None
        if len(digest) != 32:
            return None
        h.update(b"H" + digest)
    return h.hexdigest()
