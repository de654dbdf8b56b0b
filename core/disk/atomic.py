"""Write a file so that a reader sees the old bytes or the new ones, never half."""

from __future__ import annotations

import os
import tempfile


def write_atomic(path: str | os.PathLike[str], data: bytes, *, prefix: str = ".exportlens-", durable: bool = False, mode: int = 0o600) -> None:
    """A temporary file in the same folder (same file system), then ``os.replace``.
    ``durable`` also fsyncs before the rename, for files a user keeps. The file has
    ``mode`` from its creation on, whatever the umask (the cache's files are 0600:
    other users neither read results nor replace them)."""
    path = os.fspath(path)
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=os.path.dirname(os.path.abspath(path)))
    try:
        if mode != 0o600:  # what mkstemp made
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
