"""The result cache's second tier: cache files shared through an object store. Torch-free.

``cache_url`` names it: ``s3://bucket/prefix`` (AWS or an S3-compatible endpoint:
``$AWS_ENDPOINT_URL``; credentials as the AWS SDKs read them, profiles through
boto3 when it is installed), ``gs://bucket/prefix``, ``az://account/container/prefix``
or ``file:///shared/folder``. Objects are the local cache's files under the same
names (``ab/abcd....entry``), read through obstore (Rust, ~20 ms to import and ~4 ms
a small read against a loopback S3 server, where s3fs took ~1 s to import and
~20 ms a read: see docs/architecture.md).

What a store returns is hostile bytes: at most ``MAX_OBJECT_BYTES`` are accepted,
and with ``$EXPORTLENS_CACHE_SECRET`` set an object must end with a valid HMAC
(``SIGNATURE``) of its name and bytes, which writers append; the caller then decodes
it as it decodes its own files. A store that fails -- no answer within the lookup's
bound, refused credentials, an unknown bucket, a malformed URL -- is left alone for
``COOLDOWN_S`` (the rest of a ``check``, the editor for a while), and said once.
Every read runs on a daemon thread the caller waits on at most its bound for the
store's answer, then while the bytes keep coming (``STALL_S``, ``BODY_CAP_S``): no
client setting (or lack of one) can make a lookup wait longer on a store that does
not answer, or keep a process alive.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
import time
from typing import Any, Callable, TypeVar

from exportlens.core.cache.entry_file import MAX_FILE_BYTES

log = logging.getLogger("exportlens.cache")

T = TypeVar("T")

LOOKUP_BOUND_S = 2.0  # the most one lookup waits for the store to answer, all its reads together
STALL_S = 2.0  # an answered read whose bytes stop coming this long has failed
BODY_CAP_S = 300.0  # and one that is still coming after this long (a trickle)
WRITE_BOUND_S = 120.0  # one upload (an entry may be tens of MB)
COOLDOWN_S = 300.0  # how long a store that failed is left alone
# Opening the read client (importing obstore, and boto3 for an AWS profile: a second
# or more, cold, on a loaded machine) happens once, on a thread of its own from the
# moment the store is made, and never counts against a lookup's bound: the first
# lookup waits for it up to this long, so that a slow import is not taken for a
# store that does not answer (which would leave the store alone for COOLDOWN_S).
OPEN_BOUND_S = 60.0
SIGNATURE = b"ELSIG1"  # + the HMAC-SHA256 of name and bytes, at the end of a signed object
_SIGNED_TAIL = len(SIGNATURE) + 32
MAX_OBJECT_BYTES = MAX_FILE_BYTES + _SIGNED_TAIL
SCHEMES = ("s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "file")


def lookup_bound_s() -> float:
    """``LOOKUP_BOUND_S``, or ``$EXPORTLENS_STORE_LOOKUP_S`` (seconds, more than 0)
    where a store is far or slow to answer (another region, a loaded runner)."""
    try:
        bound = float(os.environ.get("EXPORTLENS_STORE_LOOKUP_S", ""))
    except ValueError:
        return LOOKUP_BOUND_S
    return bound if 0 < bound < 3600 else LOOKUP_BOUND_S


class StoreError(Exception):
    """The store did not answer as a store should (not: the object is not there)."""


class Rejected(ValueError):
    """An object that is not accepted (too large, unsigned, a bad signature)."""


def secret_from_env() -> bytes | None:
    """``$EXPORTLENS_CACHE_SECRET``, when set and not empty."""
    secret = os.environ.get("EXPORTLENS_CACHE_SECRET", "")
    return secret.encode() if secret else None


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot name a store, or None."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in SCHEMES:
        return f"cache_url {url!r}: expected s3://, gs://, az:// or file:// followed by a bucket or folder"
    if not rest.strip("/"):
        return f"cache_url {url!r}: no bucket or folder"
    return None


def sign(secret: bytes, name: str, data: bytes) -> bytes:
    return data + SIGNATURE + hmac.new(secret, name.encode() + b"\x00" + data, hashlib.sha256).digest()


def verify(secret: bytes | None, name: str, data: bytes) -> bytes:
    """The object's bytes without their signature; Rejected when ``secret`` is set and
    the signature is missing or wrong. Without a secret, a signature is dropped unread."""
    signed = len(data) >= _SIGNED_TAIL and data[-_SIGNED_TAIL : -32] == SIGNATURE
    body = data[:-_SIGNED_TAIL] if signed else data
    if secret is None:
        return body
    if not signed:
        raise Rejected("unsigned, and $EXPORTLENS_CACHE_SECRET requires a signature")
    expected = hmac.new(secret, name.encode() + b"\x00" + body, hashlib.sha256).digest()
    if not hmac.compare_digest(expected, data[-32:]):
        raise Rejected("bad signature")
    return body


def _bounded(call: Callable[[], T], bound_s: float, what: str) -> T:
    """``call()`` on a daemon thread, waited on at most ``bound_s``: StoreError past it."""
    box: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            box.append((True, call()))
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            box.append((False, e))
        done.set()

    threading.Thread(target=run, name="exportlens-store", daemon=True).start()
    if not done.wait(max(bound_s, 0.0)):
        raise StoreError(f"no answer to {what} within {bound_s:.1f} s")
    ok, value = box[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


class RemoteStore:
    """The store at ``url``. ``write``: uploads are allowed (``--cache-write``).
    ``warn`` hears each failure once (``check``'s warning, the server's log and status).
    Thread-safe; ``get`` and ``put`` never raise anything but ``Rejected``."""

    def __init__(self, url: str, *, write: bool = False, secret: bytes | None = None, warn: Callable[[str], None] | None = None) -> None:
        self.url = url.rstrip("/")
        self.write = write
        self.secret = secret
        self._warn = warn or log.warning
        self._lock = threading.Lock()
        self._stores: dict[str, Any] = {}
        self._down_until = 0.0
        self.problem: str | None = url_problem(url)  # what is wrong now, for the editor's status
        self._said: set[str] = set()
        self._write_refused = False
        self.reads = 0  # objects served
        self._opened = threading.Event()  # the read client's opening is over (opened or failed)
        if self.problem:
            self._say(self.problem)
            self._opened.set()
        else:
            threading.Thread(target=self._open_reader, name="exportlens-store-open", daemon=True).start()

    def _open_reader(self) -> None:
        try:
            self._store("read")
        except BaseException:  # noqa: BLE001 - opened again by the read, which reports it
            pass
        finally:
            self._opened.set()

    # ---- state

    @property
    def available(self) -> bool:
        with self._lock:
            return self.problem is None or (not self.problem.startswith("cache_url") and time.monotonic() >= self._down_until)

    def status(self) -> dict[str, Any]:
        """What the editor's status shows: the URL, whether it is used now, why not."""
        return {"url": self.url, "write": self.write and not self._write_refused, "signed": self.secret is not None, "available": self.available, "problem": self.problem}

    def _failed(self, what: str, e: BaseException) -> None:
        why = f"the shared cache {self.url} failed ({what}: {_describe(e)}); exporting without it for {COOLDOWN_S:.0f} s"
        with self._lock:
            self._down_until = time.monotonic() + COOLDOWN_S
            self.problem = why
        self._say(why)

    def _say(self, text: str) -> None:
        key = text.partition("(")[0]
        if key in self._said:
            log.debug("%s", text)
            return
        self._said.add(key)
        self._warn(text)

    # ---- the client

    def wait_opened(self) -> bool:
        """Wait for the read client's opening (``OPEN_BOUND_S`` at most); whether it is over."""
        if self._opened.wait(OPEN_BOUND_S):
            return True
        self._failed("opening its client", StoreError(f"not opened within {OPEN_BOUND_S:.0f} s"))
        return False

    def _store(self, purpose: str) -> Any:
        """The obstore store for reading (short timeouts, no retry) or writing."""
        with self._lock:
            store = self._stores.get(purpose)
        if store is not None:
            return store
        store = _open(self.url, purpose)
        if store is None:  # a file:// folder not made yet: opened again next time
            return None
        with self._lock:
            return self._stores.setdefault(purpose, store)

    # ---- reads and writes

    def get(self, name: str, bound_s: float | None = None) -> bytes | None:
        """The object ``name``'s bytes, verified (``verify``) and without their
        signature; None when it is not there or the store is unavailable; Rejected
        when it is too large or its signature does not hold."""
        if bound_s is None:
            bound_s = lookup_bound_s()
        if not self.available or bound_s <= 0:
            return None
        if not self.wait_opened():
            return None
        try:
            data = _read_object(lambda: self._store("read"), name, bound_s)
        except FileNotFoundError:
            return None
        except Rejected:
            raise
        except Exception as e:  # noqa: BLE001 - any failure of the store is a miss
            self._failed(f"reading {name}", e)
            return None
        with self._lock:
            self.reads += 1
            if self.problem and not self.problem.startswith("cache_url"):
                self.problem = None  # answering again
        return verify(self.secret, name, data)

    def put(self, name: str, data: bytes) -> bool:
        """Upload ``data`` as ``name`` (signed when there is a secret); whether it was."""
        if not self.write or self._write_refused or not self.available:
            return False
        body = sign(self.secret, name, data) if self.secret is not None else data
        try:
            _bounded(lambda: _put(self._store("write"), name, body), WRITE_BOUND_S, f"writing {name}")
            return True
        except Exception as e:  # noqa: BLE001 - a store that refuses is not a failed check
            if _refused(e):
                self._write_refused = True
                self._say(f"cannot write to the shared cache {self.url} ({_describe(e)}); not writing to it again in this process")
            else:
                self._failed(f"writing {name}", e)
            return False


def _describe(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300]}" if text else type(e).__name__


def _refused(e: BaseException) -> bool:
    try:
        from obstore.exceptions import PermissionDeniedError, UnauthenticatedError
    except ImportError:  # no obstore: the store could not even be opened
        return isinstance(e, PermissionError)
    return isinstance(e, (PermissionDeniedError, UnauthenticatedError, PermissionError))


def _read_object(store: Callable[[], Any], name: str, bound_s: float) -> bytes:
    """The object's bytes, read on a daemon thread: the store must answer (status and
    size) within ``bound_s``, then its bytes must keep coming (no pause of ``STALL_S``,
    all of them within ``BODY_CAP_S``): a large entry is read at the store's pace, a
    store that does not answer or stops sending is a StoreError. FileNotFoundError
    when it is not there; Rejected when it is larger than a cache file may be."""
    answered, done = threading.Event(), threading.Event()
    box: dict[str, Any] = {"moved": time.monotonic()}

    def run() -> None:
        try:
            box["data"] = _get(store(), name, answered, box)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = e
        answered.set()
        done.set()

    threading.Thread(target=run, name="exportlens-store", daemon=True).start()
    if not answered.wait(max(bound_s, 0.0)):
        raise StoreError(f"no answer within {bound_s:.1f} s")
    started = time.monotonic()
    while not done.wait(STALL_S / 4):
        now = time.monotonic()
        if now - box["moved"] > STALL_S or now - started > BODY_CAP_S:
            raise StoreError(f"its bytes stopped coming ({box.get('read', 0)} of {box.get('size', '?')} read)")
    if "error" in box:
        raise box["error"]
    data: bytes = box["data"]
    return data


def _get(store: Any, name: str, answered: threading.Event, box: dict[str, Any]) -> bytes:
    import obstore

    if store is None:
        raise FileNotFoundError(name)  # a shared folder no writer has made yet
    try:
        result = obstore.get(store, name)
    except FileNotFoundError:
        raise
    except Exception as e:
        from obstore.exceptions import NotFoundError

        if isinstance(e, NotFoundError):
            raise FileNotFoundError(name) from None
        raise
    size = result.meta.get("size")
    if isinstance(size, int) and size > MAX_OBJECT_BYTES:
        raise Rejected(f"{size} bytes, over the {MAX_OBJECT_BYTES} a cache file may have")
    box["size"], box["read"], box["moved"] = size, 0, time.monotonic()
    answered.set()
    chunks = []
    for chunk in result.stream(min_chunk_size=256 << 10):
        chunks.append(bytes(chunk))
        box["read"] += len(chunks[-1])
        box["moved"] = time.monotonic()
        if box["read"] > MAX_OBJECT_BYTES:
            raise Rejected(f"over the {MAX_OBJECT_BYTES} bytes a cache file may have")
    return b"".join(chunks)


def _put(store: Any, name: str, data: bytes) -> None:
    import obstore

    obstore.put(store, name, data)


def _open(url: str, purpose: str) -> Any:
    """An obstore store for ``url``: reads time out within the lookup's bound and are
    not retried (a slow store is a miss, not a wait), writes get the client's retries."""
    try:
        from obstore.store import LocalStore, from_url
    except ImportError:
        raise StoreError("the shared cache needs obstore: pip install 'exportlens[store]'") from None

    scheme, _, rest = url.partition("://")
    if scheme == "file":
        folder = "/" + rest.lstrip("/")
        if purpose == "write":
            os.makedirs(folder, exist_ok=True)
        elif not os.path.isdir(folder):
            return None  # nothing written there yet: every object is missing (opened again next time)
        return LocalStore(folder)
    # Reads: a short connect timeout; the whole request may take as long as its bytes
    # keep coming (``_read_object`` watches the answer and the pace).
    options: dict[str, Any] = {"connect_timeout": "1s", "timeout": f"{int(BODY_CAP_S)}s"} if purpose == "read" else {"timeout": f"{int(WRITE_BOUND_S)}s"}
    kwargs: dict[str, Any] = {}
    if scheme in ("s3", "s3a"):
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            kwargs["endpoint"] = endpoint
            if endpoint.startswith("http://"):
                options["allow_http"] = True  # a MinIO or a test server on loopback
        provider, region = _aws_profile()
        if provider is not None:
            kwargs["credential_provider"] = provider
        if region and not (os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")):
            kwargs["region"] = region
    retry = {"max_retries": 0, "retry_timeout": _seconds(lookup_bound_s())} if purpose == "read" else None
    return from_url(url, client_options=options, retry_config=retry, **kwargs)  # type: ignore[arg-type,call-overload]


def _seconds(s: float) -> Any:
    import datetime

    return datetime.timedelta(seconds=s)


def _aws_profile() -> tuple[Any, str | None]:
    """Credentials and region from the AWS SDK's own chain when the environment names
    no key itself (a profile, SSO, a role through ``~/.aws``): boto3's session, when
    boto3 is installed (``exportlens[store]``); else ``(None, None)`` and obstore reads
    the environment (keys, ``AWS_WEB_IDENTITY_TOKEN_FILE``, the instance's role)."""
    if os.environ.get("AWS_ACCESS_KEY_ID") and not os.environ.get("AWS_PROFILE"):
        return None, None
    if not (os.environ.get("AWS_PROFILE") or os.path.exists(os.path.expanduser("~/.aws"))):
        return None, None
    try:
        import boto3
        from obstore.auth.boto3 import Boto3CredentialProvider
    except ImportError:
        log.debug("boto3 is not installed: AWS profiles are not read")
        return None, None
    session = boto3.Session()
    return Boto3CredentialProvider(session), session.region_name
