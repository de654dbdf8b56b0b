"""The preload record: which library modules the workers preload, and which libraries
they refused and why, kept so that a restarted server warms the same set. Torch-free:
the pool writes a refusal when a worker dies importing a library, the zygote the rest.

One file per environment (``preload-<digest>.msgpack`` in the cache folder; the
digest is of the interpreter's prefix, Python's and torch's versions, as the
installed libraries are that environment's). Each library (a top-level module) has
its modules in import order and the day a model last used it; a library unused for
``KEEP_DAYS`` is dropped, so a worker does not carry forever what one old project
imported. A refusal holds the library's state (``library_state``) when it was
refused: another version of it is tried again.

Read as untrusted input, like the cache: only a regular file owned by this user and
writable by no one else (a record names modules the worker imports), bounded msgpack,
every name a dotted identifier; anything else is logged and read as an empty record.
Written whole to a temporary file and renamed (0600, in a folder created 0700), after
merging with what is on disk, so that workers writing at once lose little: at worst
a module learned again or a library tried once more.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import msgpack

from exportlens.core.cache.entry_file import preload_record_name
from exportlens.core.cache.keys import torch_version
from exportlens.core.disk.atomic import write_atomic
from exportlens.core.serde.codec import SchemaError, unpack

log = logging.getLogger("exportlens.preload")

FORMAT = 1
KEEP_DAYS = 30
MAX_BYTES = 4 << 20
MAX_LIBRARIES = 1000
MAX_MODULES = 20000  # in all
MAX_REASON = 2000
FOLDER_MODE = 0o700
FILE_MODE = 0o600


def today() -> int:
    return int(time.time() // 86400)


@dataclass
class Library:
    modules: list[str] = field(default_factory=list)  # in import order
    used: int = 0  # the day a model last imported it (or it was learned)


@dataclass
class Refusal:
    reason: str
    file: str = ""  # the library's top-level file, and its state when refused
    state: str = ""


@dataclass
class Record:
    libraries: dict[str, Library] = field(default_factory=dict)
    refused: dict[str, Refusal] = field(default_factory=dict)

    def merge(self, other: Record) -> None:
        """Take what ``other`` knows and this record does not (modules learned, refusals)."""
        for name, library in other.libraries.items():
            mine = self.libraries.setdefault(name, Library(used=library.used))
            known = set(mine.modules)
            mine.modules += [m for m in library.modules if m not in known]
            mine.used = max(mine.used, library.used)
        for name, refusal in other.refused.items():
            self.refused.setdefault(name, refusal)
        for name in self.refused:
            self.libraries.pop(name, None)


def path_in(folder: str | os.PathLike[str]) -> str:
    """The record of this environment in ``folder``."""
    environment = "\0".join([os.path.realpath(sys.prefix), sys.version, torch_version()])
    return os.path.join(os.fspath(folder), preload_record_name(environment))


def _name(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 500 and all(part.isidentifier() for part in value.split("."))


def decode(data: bytes) -> Record:
    """The record in ``data``; ValueError for anything that is not one."""
    tree = unpack(data)
    if not isinstance(tree, dict) or tree.get("format") != FORMAT:
        raise ValueError("not a preload record of this version")
    libraries, refused = tree.get("libraries"), tree.get("refused")
    if (
        not isinstance(libraries, dict)
        or not isinstance(refused, dict)
        or len(libraries) + len(refused) > MAX_LIBRARIES
    ):
        raise ValueError("malformed libraries")
    record = Record()
    total = 0
    for name, entry in libraries.items():
        if not _name(name) or "." in name or not isinstance(entry, dict):
            raise ValueError(f"bad library {name!r}")
        modules, used = entry.get("modules"), entry.get("used")
        if (
            not isinstance(modules, list)
            or not all(_name(m) and m.partition(".")[0] == name for m in modules)
            or type(used) is not int
        ):
            raise ValueError(f"bad modules of {name!r}")
        total += len(modules)
        record.libraries[name] = Library(list(dict.fromkeys(modules)), used)
    for name, entry in refused.items():
        if not _name(name) or "." in name or not isinstance(entry, dict):
            raise ValueError(f"bad refusal {name!r}")
        fields = [entry.get("reason"), entry.get("file", ""), entry.get("state", "")]
        texts = [x for x in fields if isinstance(x, str) and len(x) <= MAX_REASON]
        if len(texts) != len(fields):
            raise ValueError(f"bad refusal of {name!r}")
        record.refused[name] = Refusal(*texts)
    if total > MAX_MODULES:
        raise ValueError(f"{total} modules, over {MAX_MODULES}")
    return record


def encode(record: Record) -> bytes:
    return msgpack.packb(
        {
            "format": FORMAT,
            "libraries": {n: {"modules": lib.modules, "used": lib.used} for n, lib in sorted(record.libraries.items())},
            "refused": {
                n: {"reason": r.reason[:MAX_REASON], "file": r.file, "state": r.state}
                for n, r in sorted(record.refused.items())
            },
        },
        use_bin_type=True,
    )


def read(path: str) -> Record:
    """The record at ``path``; an empty one when there is none or it cannot be trusted
    (logged). Never raises."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return Record()
    except OSError as e:
        log.warning("ignoring the preload record %s: %s", path, e)
        return Record()
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            raise ValueError("not a regular file of this user, writable by no one else")
        if st.st_size > MAX_BYTES:
            raise ValueError(f"{st.st_size} bytes, over {MAX_BYTES}")
        with os.fdopen(os.dup(fd), "rb") as f:
            return decode(f.read(MAX_BYTES + 1))
    except (OSError, ValueError, SchemaError) as e:
        log.warning("ignoring the preload record %s: %s", path, e)
        return Record()
    finally:
        os.close(fd)


def update(path: str, change: Callable[[Record], None]) -> Record:
    """Apply ``change`` to the record on disk, drop libraries unused for ``KEEP_DAYS``,
    write it back; the record written. Never raises: a record that cannot be written
    is logged and only costs the next worker what it learns again."""
    record = read(path)
    change(record)
    oldest = today() - KEEP_DAYS
    record.libraries = {n: lib for n, lib in record.libraries.items() if lib.used >= oldest and n not in record.refused}
    try:
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            os.makedirs(folder, mode=FOLDER_MODE, exist_ok=True)
        write_atomic(path, encode(record), prefix=".tmp-preload-", mode=FILE_MODE)
    except OSError as e:
        log.warning("cannot write the preload record %s: %s", path, e)
    return record


def refuse(path: str, library: str, reason: str, file: str = "", state: str = "") -> None:
    """Record that ``library`` is not to be preloaded (for its state ``state``), and why."""
    log.info("not preloading %s: %s", library, reason)

    def change(record: Record) -> None:
        record.refused[library] = Refusal(reason, file, state)

    update(path, change)
