"""Which folders the user trusts: the record behind ``exportlens trust``.

The language server runs the code of the files it opens (that is how it exports
them), so it runs nothing in a folder until the user said so, as direnv's ``allow``,
mise's ``trust`` and Neovim's ``:trust`` do. The CLI needs no record: running
``exportlens check`` is the consent.

The record is one JSON file, ``trusted.json``, in the user's configuration folder
(:func:`config_dir`): ``{"version": 1, "folders": ["/real/path", ...]}``. A folder
covers its subfolders; paths are resolved (``realpath``) when written and when
asked about, so a link into a trusted folder is trusted and a link out of it is not.

The file decides what code runs, so it is read as untrusted input: a regular file
owned by this user that no one else may write (nor its folder), with that exact
shape. Anything else is no record at all -- nothing is trusted -- and a
:class:`TrustRecord` whose ``problem`` says why, for the caller to log; reading
never raises. Writes go to a temporary file (0600) in a 0700 folder, renamed into place.

Torch-free and LSP-free: the CLI and the server both use it.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

FILE_NAME = "trusted.json"
VERSION = 1
MAX_BYTES = 1 << 20  # a record of a million bytes is not one a person wrote with `exportlens trust`
ENV = "EXPORTLENS_CONFIG_DIR"


def config_dir() -> Path:
    """``$EXPORTLENS_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/exportlens`` (an absolute
    one: the XDG spec says to ignore a relative value), else the platform's user
    configuration folder: ``%APPDATA%\\exportlens`` on Windows,
    ``~/Library/Application Support/exportlens`` on macOS, ``~/.config/exportlens``."""
    explicit = os.environ.get(ENV)
    if explicit:
        return Path(explicit).expanduser().absolute()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "exportlens"
    if sys.platform == "win32" and os.environ.get("APPDATA"):
        return Path(os.environ["APPDATA"]) / "exportlens"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "exportlens"
    return Path.home() / ".config" / "exportlens"


def record_path() -> Path:
    return config_dir() / FILE_NAME


def resolve(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.path.abspath(os.path.expanduser(os.fspath(path))))


def covers(folder: str, path: str) -> bool:
    """Whether resolved ``path`` is ``folder`` or inside it."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class TrustRecord:
    """The folders the record trusts (resolved), and why it was ignored (None: it was
    read, or there is none yet)."""

    folders: tuple[str, ...] = ()
    problem: str | None = None
    path: str = field(default="")

    def trusts(self, path: str | os.PathLike[str]) -> bool:
        wanted = resolve(path)
        return any(covers(folder, wanted) for folder in self.folders)

    def folder_for(self, path: str | os.PathLike[str]) -> str | None:
        """The trusted folder that covers ``path`` (the deepest), or None."""
        wanted = resolve(path)
        found = [f for f in self.folders if covers(f, wanted)]
        return max(found, key=len) if found else None


def _unsafe(st: os.stat_result, what: str) -> str | None:
    """Why a file or folder of the record may not be believed, or None."""
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"{what} belongs to another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{what} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}); make it private with chmod go-w"
    return None


def load(path: str | os.PathLike[str] | None = None) -> TrustRecord:
    """The record at ``path`` (default :func:`record_path`); never raises."""
    file = Path(path) if path is not None else record_path()
    shown = str(file)
    ignored = f"exportlens: ignoring the trust record {shown}"
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return TrustRecord(path=shown)
    except OSError as e:
        return TrustRecord(problem=f"{ignored}: cannot open it ({e.strerror or e}); nothing is trusted", path=shown)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return TrustRecord(problem=f"{ignored}: it is not a regular file; nothing is trusted", path=shown)
        why = _unsafe(st, "it")
        if why is None:
            try:
                why = _unsafe(os.stat(file.parent), "its folder")
            except OSError as e:
                why = f"its folder cannot be read ({e.strerror or e})"
        if why is not None:
            return TrustRecord(problem=f"{ignored}: {why}; nothing is trusted", path=shown)
        if st.st_size > MAX_BYTES:
            return TrustRecord(problem=f"{ignored}: it is {st.st_size} bytes, more than a record holds; nothing is trusted", path=shown)
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        return TrustRecord(problem=f"{ignored}: cannot read it ({e.strerror or e}); nothing is trusted", path=shown)
    finally:
        os.close(fd)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        return TrustRecord(problem=f"{ignored}: it is not JSON ({e}); nothing is trusted", path=shown)
    folders = doc.get("folders") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(folders, list):
        return TrustRecord(problem=f'{ignored}: expected {{"version": {VERSION}, "folders": [...]}}; nothing is trusted', path=shown)
    if not all(isinstance(f, str) and os.path.isabs(f) and "\0" not in f for f in folders):
        return TrustRecord(problem=f"{ignored}: its folders must be absolute paths; nothing is trusted", path=shown)
    return TrustRecord(folders=tuple(dict.fromkeys(os.path.normpath(f) for f in folders)), path=shown)


class TrustError(Exception):
    """The record could not be changed (the message says why)."""


def _write(folders: list[str], path: Path) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    why = _unsafe(os.stat(path.parent), f"the folder {path.parent}")
    if why is not None:
        raise TrustError(why)
    data = json.dumps({"version": VERSION, "folders": folders}, indent=2).encode() + b"\n"
    fd, temporary = tempfile.mkstemp(prefix=".trusted-", suffix=".tmp", dir=path.parent)  # mkstemp: 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _current(path: Path) -> list[str]:
    """The folders on disk, to change; a record that is ignored is refused rather
    than overwritten (its owner should look at it)."""
    record = load(path)
    if record.problem is not None:
        raise TrustError(record.problem.removeprefix("exportlens: "))
    return list(record.folders)


def trust(folder: str | os.PathLike[str], path: str | os.PathLike[str] | None = None) -> str:
    """Record ``folder`` (resolved) as trusted; the resolved folder. Raises TrustError."""
    file = Path(path) if path is not None else record_path()
    resolved = resolve(folder)
    if not os.path.isdir(resolved):
        raise TrustError(f"{resolved} is not a folder")
    try:
        folders = _current(file)
        if resolved not in folders:
            _write([*folders, resolved], file)
    except OSError as e:
        raise TrustError(f"cannot write {file}: {e.strerror or e}") from e
    return resolved


def forget(folder: str | os.PathLike[str], path: str | os.PathLike[str] | None = None) -> list[str]:
    """Trust ``folder`` no more: it and the trusted folders inside it are removed;
    what was removed. Raises TrustError."""
    file = Path(path) if path is not None else record_path()
    resolved = resolve(folder)
    try:
        folders = _current(file)
        gone = [f for f in folders if covers(resolved, f)]
        if gone:
            _write([f for f in folders if f not in gone], file)
    except OSError as e:
        raise TrustError(f"cannot write {file}: {e.strerror or e}") from e
    return gone
