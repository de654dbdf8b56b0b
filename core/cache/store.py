"""Content-addressed cache of export results. Torch-free (the CLI and server use it).

A result depends on the file's bytes, the settings of the request, the torch,
Python and exportlens versions -- and on the files the run depended on, which are
only known after a run: the local modules it imported or tried to import, and the
project files it read. So, like ccache's direct mode, there are two levels:

* the *manifest*, keyed by the first-level hash (path, bytes, settings, versions),
  records the dependency paths of the stored results, newest first (at most
  ``MANIFEST_LISTS`` lists): one text need not give one list -- a job forked from a
  worker that preloaded a library records where an import of it would have looked,
  and a module run from an editor's unsaved text adds what that text imports -- and
  a manifest that kept only the last list made every result filed under another
  unreachable (a restored helper exported again);
* the *entry*, keyed by the first-level hash plus the state of each dependency
  (its bytes' hash, or "absent": a module looked for and not found), holds the
  ``FileResult``.

A lookup reads the manifest, takes each dependency's state as it is now (one that
cannot be read is a miss) and reads the entry of the first list whose entry is
there. Editing a helper module, fixing one that raised, or creating one that was
missing changes the second key.

A third file, the *tokens manifest*, serves a result again when only comments or
blank lines changed (``exportlens.core.cache.moved``).

Nothing in a key or a file is of the machine (``exportlens.core.cache.portable``), so a
``remote`` (``exportlens.core.cache.remote``) can share them: a lookup reads the folder,
then the store (bounded), and keeps in the folder what the store served, checked as
its own files are; a store uploads when the remote takes writes.

Files are written to a temporary file in the same folder and renamed into place, so
a reader sees a whole old file or a whole new one, and two writers of one key leave
one valid entry. Each file carries a header (magic, format version, length, digest
of the payload): anything that does not check out is a miss, logged as a warning,
and the next store rewrites it. The folder is bounded: a hit touches the files'
mtime, and when a store takes the folder over ``max_bytes`` the oldest files go.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from exportlens.core.cache.entry_file import (
    KIND_ENTRY,
    KIND_MANIFEST,
    KIND_TOKENS,
    MAX_FILE_BYTES,
    PRELOAD_RECORD,
    SUFFIX,
    CorruptEntry,
    decode_file,
    encode_file,
    listed_libraries,
)
from exportlens.core.cache.keys import first_key, second_key, source_bytes, states_now
from exportlens.core.cache.moved import moved_result, tokens_file, tokens_key
from exportlens.core.cache.policy import cacheable, still_missing
from exportlens.core.cache.portable import Places, places_for
from exportlens.core.cache.remote import Rejected, RemoteStore, lookup_bound_s
from exportlens.core.disk.atomic import write_atomic
from exportlens.core.disk.states import ABSENT
from exportlens.core.model.plain import from_plain, pack, to_plain
from exportlens.core.model.request import ExportRequest
from exportlens.core.model.results import FileResult

log = logging.getLogger("exportlens.cache")

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
RESCAN_S = 300.0  # how stale the folder's size estimate may get in a long-lived process
STALE_TEMP_S = 3600.0  # temporary files older than this were left by a crash
EVICT_TO = 0.9  # fraction of max_bytes kept after an eviction
_NOT_STARTED = -1.0  # a lookup's deadline before it first reads the store
MANIFEST_LISTS = 8  # dependency lists a manifest keeps for one text (see the docstring)
FOLDER_MODE = 0o700  # the cache folder and its shards, when this cache creates them
FILE_MODE = 0o600  # every cache file

_CACHE_FILE = re.compile(r"^[0-9a-f]{64}\.(entry|manifest|tokens)$")
_SHARD = re.compile(r"^[0-9a-f]{2}$")
_TEMP_PREFIX = ".tmp-"
_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# This folder is a cache of exportlens results; see exportlens cache clear.\n"


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(p, str) for p in value)


def _dependency_lists(manifest: dict[str, Any]) -> list[tuple[list[str], list[str]]] | str:
    """``(dependencies, libraries)`` of each result a manifest names, newest first
    (``deps``/``libs``, then ``older``, which a manifest written before it lacks); what
    is wrong with it when it is malformed."""
    deps, libraries, older = manifest.get("deps"), listed_libraries(manifest), manifest.get("older", [])
    if not _strings(deps):
        return "bad dependency list"
    if libraries is None:
        return "bad library list"
    if not isinstance(older, list) or not all(isinstance(i, list) and len(i) == 2 and _strings(i[0]) and _strings(i[1]) for i in older):
        return "bad list of older dependency lists"
    return [(deps, libraries), *((i[0], i[1]) for i in older)]


def _local_list(places: Places, paths: list[str]) -> list[str]:
    """A stored list of portable paths as this side's paths (ValueError: one it cannot place)."""
    return [places.local(p) for p in paths]


def _object_name(key: str, kind: int) -> str:
    """A cache file's name in the store: as in the folder (``ab/abcd....entry``)."""
    return f"{key[:2]}/{key}{SUFFIX[kind]}"


def _payload(key: str, kind: int, data: bytes) -> Any:
    """The payload of a cache file's bytes, checked to be for ``key`` (CorruptEntry)."""
    if len(data) > MAX_FILE_BYTES:
        raise CorruptEntry(f"over {MAX_FILE_BYTES} bytes")
    payload = decode_file(kind, data)
    if not isinstance(payload, dict) or payload.get("key") != key:
        raise CorruptEntry("the payload is not for this key")
    return payload


def default_cache_dir() -> Path:
    """``$EXPORTLENS_CACHE_DIR``, else ``$XDG_CACHE_HOME/exportlens``, else ``~/.cache/exportlens``."""
    explicit = os.environ.get("EXPORTLENS_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME")
    # The XDG spec says a relative value is invalid and must be ignored.
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "exportlens"
    return Path.home() / ".cache" / "exportlens"


@dataclass(frozen=True)
class Checked:
    """A result that may be kept, with what keys it, as of its check
    (``ResultCache.check``): everything read from the disk (the file, its local
    modules, pyproject.toml, whether it is as saved) is read then, so writing it
    later files it under the keys of the files the export ran."""

    request: ExportRequest
    result: FileResult
    key1: str
    key2: str
    deps: list[str]
    libraries: list[str]
    places: Places
    share: bool  # the shared store gets it too
    tokens: tuple[str, bytes] | None  # the tokens manifest's key and file (``moved.tokens_file``)


class ResultCache:
    """The cache in ``directory`` (default: :func:`default_cache_dir`), at most
    about ``max_bytes`` on disk, with ``remote`` (``exportlens.core.cache.remote``) as
    a second tier: a lookup reads the folder first, then the store (waiting at most
    ``LOOKUP_BOUND_S`` for its answers, all its reads together), and keeps what the store served in the
    folder; a store also uploads when the remote allows writing. Thread-safe; lookups
    never raise, stores never raise."""

    def __init__(self, directory: str | os.PathLike[str] | None = None, max_bytes: int = DEFAULT_MAX_BYTES, remote: RemoteStore | None = None) -> None:
        self.directory = Path(directory).expanduser().absolute() if directory is not None else default_cache_dir()
        self.max_bytes = max_bytes
        self.remote = remote
        self.from_store = 0  # hits that read something from the store
        self._tl = threading.local()  # this thread's lookup: its deadline, whether the store served it
        self.hits = 0
        self.misses = 0
        self.corrupt = 0  # misses because a file was unreadable
        self.moved = 0  # hits served with their lines moved (a comment-only edit)
        self._lock = threading.Lock()
        # request -> (sha256 of the source seen at lookup, time of the lookup): a
        # store only keeps a result whose inputs did not change while it was made.
        self._pending: dict[ExportRequest, tuple[bytes, int]] = {}
        self._size: int | None = None  # estimate of the folder's size
        self._scanned_at = 0.0
        self._store_warned = False

    # ---- public API

    def lookup(self, request: ExportRequest) -> FileResult | None:
        """The stored result for this request, or None (a miss)."""
        return self.find(request)[0]

    def find(self, request: ExportRequest) -> tuple[FileResult | None, bool]:
        """The stored result for this request, or None (a miss), and whether the
        store served it (some file of it was read from the store)."""
        started_ns = time.time_ns()
        try:
            source = source_bytes(request)
        except (OSError, UnicodeError):
            self._count(hit=False)
            return None, False
        with self._lock:
            if len(self._pending) > 4096:  # requests looked up but never stored
                self._pending.clear()
            self._pending[request] = (hashlib.sha256(source).digest(), started_ns)
        result, remote = self._bounded_lookup(request, source)
        self._count(hit=result is not None)
        if result is not None and remote:
            with self._lock:
                self.from_store += 1
        return result, remote and result is not None

    def recorded_ms(self, request: ExportRequest) -> float | None:
        """The export time recorded with the stored result of ``request`` (the folder,
        then the store), or None when there is none: what ``check --shard`` balances
        by. Neither counted as a hit or a miss nor remembered for a store."""
        try:
            source = source_bytes(request)
        except (OSError, UnicodeError):
            return None
        result, _ = self._bounded_lookup(request, source)
        return result.elapsed_ms if result is not None else None

    def _bounded_lookup(self, request: ExportRequest, source: bytes) -> tuple[FileResult | None, bool]:
        self._tl.deadline = _NOT_STARTED  # set at the lookup's first read of the store
        self._tl.remote = False
        try:
            return self._lookup(request, source), bool(self._tl.remote)
        finally:
            self._tl.deadline = None

    def store(self, request: ExportRequest, result: FileResult) -> None:
        """Keep ``result`` for ``request``, unless it is not :func:`cacheable` or, when
        ``lookup(request)`` came first (as it should: look up, export on a miss, store),
        the file or a local import changed since. IO errors are logged, never raised."""
        checked = self.check(request, result)
        if checked is not None:
            self.write(checked)

    def check(self, request: ExportRequest, result: FileResult) -> Checked | None:
        """``store``'s first half, as of now: whether ``result`` may be kept (see
        ``store``), with what keys it. ``write`` does the rest, then or later (the
        server writes a moment after the result arrived, off the save's path: a file
        changed in that moment must not count as changed during the export)."""
        with self._lock:
            seen = self._pending.pop(request, None)
        if not cacheable(result) or result.path != request.path:
            return None
        try:
            return self._check(request, result, seen)
        except Exception as e:  # noqa: BLE001 - a cache must never break a check
            self._warn_store(e)
            return None

    def write(self, checked: Checked) -> None:
        """Write what ``check`` let through. IO errors are logged, never raised."""
        try:
            self._write_checked(checked)
        except Exception as e:  # noqa: BLE001 - a cache must never break a check
            self._warn_store(e)

    def clear(self) -> int:
        """Remove every cache file (only those: the folder may hold other things) and
        the workers' preload records; the number of results removed."""
        removed = 0
        for path, _, _, _ in self._files(include_temp=True):
            if self._unlink(path) and path.suffix == ".entry":
                removed += 1
        for shard in self._shards():
            try:
                shard.rmdir()
            except OSError:
                pass  # not empty: something else lives there
        tag = self.directory / "CACHEDIR.TAG"
        try:
            if tag.read_text() == _TAG:
                tag.unlink()
        except (OSError, UnicodeError):
            pass
        try:  # what the workers preload: learnt again from the next exports
            with os.scandir(self.directory) as it:
                records = [Path(e.path) for e in it if PRELOAD_RECORD.match(e.name) and e.is_file(follow_symlinks=False)]
        except OSError:
            records = []
        for record in records:
            self._unlink(record)
        with self._lock:
            self._size = 0
            self._scanned_at = time.monotonic()
        return removed

    def size(self) -> int:
        """Bytes of cache files in the folder now."""
        return sum(size for _, size, _, _ in self._files())

    def evict(self) -> None:
        """Delete least-recently-used files until the folder is under ``EVICT_TO`` of the
        bound (and temporary files a crashed writer left behind)."""
        files = []
        for path, size, mtime, temp in self._files(include_temp=True):
            if temp and time.time_ns() - mtime > STALE_TEMP_S * 1e9:
                self._unlink(path)
            elif not temp:
                files.append((path, size, mtime))
        total = sum(size for _, size, _ in files)
        if total > self.max_bytes:
            files.sort(key=lambda f: f[2])  # oldest mtime first
            goal = int(self.max_bytes * EVICT_TO)
            for path, size, _ in files:
                if total <= goal:
                    break
                self._unlink(path)
                total -= size
        with self._lock:
            self._size = total
            self._scanned_at = time.monotonic()

    def _unlink(self, path: Path) -> bool:
        try:
            path.unlink()
            return True
        except FileNotFoundError:
            return False  # another process removed it first
        except OSError as e:
            log.warning("cannot remove %s: %s", path, e)
            return False

    # ---- lookup internals

    def _count(self, hit: bool) -> None:
        with self._lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1

    def _path(self, key: str, kind: int) -> Path:
        return self.directory / key[:2] / (key + SUFFIX[kind])

    def _read(self, key: str, kind: int, remote: bool = True) -> Any | None:
        """The payload of a cache file: the folder's, else (``remote``) the store's."""
        path = self._path(key, kind)
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except (FileNotFoundError, NotADirectoryError):
            # never stored (or no cache folder at all)
            return self._read_remote(key, kind) if remote else None
        except OSError as e:
            log.warning("cannot read cache file %s: %s", path, e)
            return None
        try:
            return _payload(key, kind, data)
        except CorruptEntry as e:
            self._corrupt(path, e)
            return None

    def _read_remote(self, key: str, kind: int, keep: bool = True) -> Any | None:
        """The payload of the store's file, read as hostile bytes (bounded, signed when
        there is a secret, decoded as the folder's files are) within what is left of
        the lookup's bound; kept in the folder (``keep``) when it checks out."""
        if self.remote is None:
            return None
        deadline = getattr(self._tl, "deadline", None)
        if deadline == _NOT_STARTED:
            # The bound is on the store's answers, not on opening its client (once,
            # importing obstore and maybe boto3): it starts once the client is open.
            self.remote.wait_opened()
            deadline = self._tl.deadline = time.monotonic() + lookup_bound_s()
        bound = lookup_bound_s() if deadline is None else deadline - time.monotonic()
        name = _object_name(key, kind)
        try:
            data = self.remote.get(name, bound)
            if data is None:
                return None
            if len(data) > MAX_FILE_BYTES:
                raise CorruptEntry(f"over {MAX_FILE_BYTES} bytes")
            payload = _payload(key, kind, data)
        except (Rejected, CorruptEntry) as e:
            with self._lock:
                self.corrupt += 1
            log.warning("ignoring %s/%s from the shared cache (%s)", self.remote.url, name, e)
            return None
        self._tl.remote = True
        if keep:
            try:
                self._ensure_directory()
                self._account(self._write(self._path(key, kind), data))
            except OSError as e:
                self._warn_store(e)
        return payload

    def _corrupt(self, path: Path | str, why: BaseException) -> None:
        with self._lock:
            self.corrupt += 1
        log.warning("ignoring unreadable cache file %s (%s); it will be rewritten", path, why)

    def _lookup(self, request: ExportRequest, source: bytes) -> FileResult | None:
        try:
            places = places_for(request.root)
            key1 = first_key(request, source)
            manifest = self._read(key1, KIND_MANIFEST)
            if manifest is None:
                return self._lookup_moved(request, source)
            result = self._from_manifest(request, key1, manifest, places)
            if result is None and self.remote is not None and not self._tl.remote:
                # The folder's manifest names none that holds here: the store's may
                # name another list (another machine's export of the same text).
                shared = self._read_remote(key1, KIND_MANIFEST, keep=False)
                if shared is not None:
                    result = self._from_manifest(request, key1, shared, places, merge=manifest)
            if result is not None:
                return result
            return self._lookup_moved(request, source)  # a local module may have changed in comments only
        except Exception as e:  # noqa: BLE001 - a cache must never break a check
            log.warning("cache lookup of %s failed: %s", request.path, e)
            return None

    def _from_manifest(self, request: ExportRequest, key1: str, manifest: dict[str, Any], places: Places, merge: dict[str, Any] | None = None) -> FileResult | None:
        """The result of the first of the manifest's lists whose entry is there; with
        ``merge`` (the folder's manifest, when this one came from the store), the list
        that hit is added to the folder's."""
        lists = _dependency_lists(manifest)
        if isinstance(lists, str):
            self._corrupt(self._path(key1, KIND_MANIFEST), CorruptEntry(lists))
            return None
        try:
            lists = [(_local_list(places, deps), _local_list(places, libs)) for deps, libs in lists]
        except ValueError as e:
            log.debug("%s: the manifest names a folder this side has not (%s)", request.path, e)
            return None
        # Each dependency's state once, whichever lists name it.
        paths = list(dict.fromkeys(p for deps, _ in lists for p in deps))
        now = dict(zip(paths, states_now(request, paths), strict=True))
        for deps, libraries in lists:
            key2 = second_key(key1, deps, [now[p] for p in deps], libraries=libraries, places=places)
            result = self._entry(key2, request) if key2 is not None else None
            if result is not None and key2 is not None:
                if merge is not None:
                    self._write_manifest(key1, deps, libraries, places, merge)
                self._touch(self._path(key1, KIND_MANIFEST), self._path(key2, KIND_ENTRY))
                return result
        return None

    def _write_manifest(self, key1: str, deps: list[str], libraries: list[str], places: Places, kept: dict[str, Any] | None, share: bool = False) -> int:
        """Write the manifest of ``key1`` with this list first, then the others
        ``kept`` (the manifest there before) named; bytes written."""
        portable = ([places.portable(p) for p in deps], [places.portable(p) for p in libraries])
        lists = _dependency_lists(kept) if kept is not None else []
        older = [[d, libs] for d, libs in lists if (d, libs) != portable] if not isinstance(lists, str) else []
        data = encode_file(KIND_MANIFEST, pack({"key": key1, "deps": portable[0], "libs": portable[1], "older": older[: MANIFEST_LISTS - 1]}))
        self._ensure_directory()
        return self._write(self._path(key1, KIND_MANIFEST), data, share=share)

    def _entry(self, key2: str, request: ExportRequest) -> FileResult | None:
        """The result stored under ``key2`` if it is ``request``'s and still holds;
        None otherwise (an entry that does not decode is marked corrupt)."""
        entry = self._read(key2, KIND_ENTRY)
        if entry is None:
            return None
        places = places_for(request.root)
        try:
            result = from_plain(FileResult, places.local_plain(entry.get("result")))
        except Exception as e:  # noqa: BLE001 - any decoding failure is a miss
            self._corrupt(self._path(key2, KIND_ENTRY), e)
            return None
        if places.portable(result.path) != places.portable(os.path.abspath(request.path)) or not still_missing(result):
            return None
        return replace(result, path=request.path)

    def _lookup_moved(self, request: ExportRequest, source: bytes) -> FileResult | None:
        """The result of a text with the same tokens, its lines moved to ``source``
        (``moved.moved_result``); None when there is none or it cannot be moved soundly."""
        key = tokens_key(request, source)
        if key is None:
            return None
        found = self._read(key, KIND_TOKENS)
        if found is None:
            return None
        try:
            moved = moved_result(request, source, found, lambda key2: self._entry(key2, request))
        except CorruptEntry as e:
            self._corrupt(self._path(key, KIND_TOKENS), e)
            return None
        if moved is None:
            return None
        result, key2 = moved
        with self._lock:
            self.moved += 1
        self._touch(self._path(key, KIND_TOKENS), self._path(key2, KIND_ENTRY))
        return result

    def _touch(self, *paths: Path) -> None:
        """Mark as recently used, for eviction."""
        for path in paths:
            try:
                os.utime(path)
            except OSError:
                pass

    # ---- store internals

    def _check(self, request: ExportRequest, result: FileResult, seen: tuple[bytes, int] | None) -> Checked | None:
        try:
            source = source_bytes(request)
        except (OSError, UnicodeError):
            return None  # an unreadable model file: nothing to key the result by
        deps = list(result.local_imports)
        # Key the entry by the dependency states the export itself saw when it has
        # them: re-reading them now races with an edit landing mid-store.
        states = list(result.local_import_hashes) if len(result.local_import_hashes) == len(deps) else None
        if states is None and request.overlays:
            states = states_now(request, deps)  # never file a result made from unsaved text under the disk's
        if seen is not None:  # looked up before the export: check nothing moved since
            digest, looked_up_ns = seen
            if hashlib.sha256(source).digest() != digest:
                log.debug("%s changed while it was exported; not cached", request.path)
                return None
            overlaid = {p for p, _ in request.overlays}
            for i, dep in enumerate(deps):
                if states is not None and states[i] == ABSENT:
                    continue  # if it appeared since, the key's "absent" simply never hits
                if dep in overlaid:
                    continue  # keyed by the text it ran from, not by the disk's
                try:
                    if os.stat(dep).st_mtime_ns > looked_up_ns:
                        log.debug("%s changed while %s was exported; not cached", dep, request.path)
                        return None
                except OSError:
                    return None  # gone already: the entry could never be hit
        key1 = first_key(request, source)
        places = places_for(request.root)
        # The libraries' states as the export ran them: one upgraded since keys this
        # entry by its old state, which no lookup computes any more.
        libraries = list(result.libraries)
        key2 = second_key(key1, deps, states, libraries=libraries, library_states=list(result.library_states), places=places)
        if key2 is None:
            return None
        tokens = tokens_file(request, source, key1, deps, states, libraries, places)  # reads the local modules now
        return Checked(request, result, key1, key2, deps, libraries, places, self._shares(request, source), tokens)

    def _write_checked(self, checked: Checked) -> None:
        key1, key2, places, share = checked.key1, checked.key2, checked.places, checked.share
        # Nothing of this machine in the file: its paths relative to the project and
        # the environment, put back by whoever reads it (``exportlens.core.cache.portable``).
        entry = encode_file(KIND_ENTRY, pack({"key": key2, "result": places.portable_plain(to_plain(checked.result))}))
        if len(entry) > MAX_FILE_BYTES:
            return
        # This result's list first, then the others the manifest named (another
        # process may store between the read and the write: a list lost is a miss);
        # a writer of the store keeps the lists the store's manifest named too.
        kept = self._read(key1, KIND_MANIFEST, remote=False)
        if kept is None and share:
            kept = self._read_remote(key1, KIND_MANIFEST, keep=False)
        self._ensure_directory()
        # The entry first: a manifest should not name an entry that is not there yet.
        written = self._write(self._path(key2, KIND_ENTRY), entry, share=share)
        written += self._write_manifest(key1, checked.deps, checked.libraries, places, kept, share=share)
        if checked.tokens is not None:  # comment-only edits may reuse this result
            key, data = checked.tokens
            written += self._write(self._path(key, KIND_TOKENS), data, share=share)
        self._account(written)

    def _shares(self, request: ExportRequest, source: bytes) -> bool:
        """Whether this result goes to the store too: the store takes writes, and it
        was made from the file as saved (never from an editor's unsaved text, of the
        file or of a module it imports)."""
        if self.remote is None or not self.remote.write or request.overlays:
            return False
        if request.source is None:
            return True
        try:
            with open(request.path, "rb") as f:
                return f.read() == source
        except OSError:
            return False

    def _ensure_directory(self) -> None:
        if not self.directory.is_dir():
            # 0700, its shards too, and every file 0600: on a shared machine other
            # users can neither read the results nor plant entries. A folder that
            # exists is left as its owner made it (a team may share one on purpose);
            # its entries are decoded as hostile bytes either way.
            self.directory.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
        tag = self.directory / "CACHEDIR.TAG"  # backup tools skip a tagged folder
        if not tag.exists():
            self._write(tag, _TAG.encode())

    def _write(self, path: Path, data: bytes, share: bool = False) -> int:
        """Write a file of the folder (and, ``share``, upload it under the same name)."""
        path.parent.mkdir(exist_ok=True, mode=FOLDER_MODE)
        write_atomic(path, data, prefix=_TEMP_PREFIX, mode=FILE_MODE)
        if share and self.remote is not None:
            self.remote.put(f"{path.parent.name}/{path.name}", data)
        return len(data)

    def _account(self, written: int) -> None:
        """Evict when the folder may be over the bound. The size is scanned once per
        process (and every RESCAN_S), then estimated, so a store stays cheap."""
        with self._lock:
            stale = self._size is None or time.monotonic() - self._scanned_at > RESCAN_S
            if not stale:
                assert self._size is not None
                self._size += written
            over = not stale and self._size is not None and self._size > self.max_bytes
        if stale or over:
            self.evict()

    def _warn_store(self, e: BaseException) -> None:
        # Once per cache: an unwritable folder would otherwise warn for every file.
        level = logging.DEBUG if self._store_warned else logging.WARNING
        self._store_warned = True
        log.log(level, "cannot write to the exportlens cache in %s: %s", self.directory, e)

    # ---- the folder

    def _shards(self) -> list[Path]:
        try:
            with os.scandir(self.directory) as it:
                return [Path(e.path) for e in it if _SHARD.match(e.name) and e.is_dir(follow_symlinks=False)]
        except OSError:
            return []

    def _files(self, include_temp: bool = False) -> list[tuple[Path, int, int, bool]]:
        """``(path, size, mtime_ns, temporary)`` of the cache's own files, never anything else."""
        out = []
        for shard in self._shards():
            try:
                with os.scandir(shard) as it:
                    for e in it:
                        temp = e.name.startswith(_TEMP_PREFIX)
                        if not (_CACHE_FILE.match(e.name) or (include_temp and temp)):
                            continue
                        try:
                            st = e.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        out.append((Path(e.path), st.st_size, st.st_mtime_ns, temp))
            except OSError:
                continue
        return out

