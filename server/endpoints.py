"""What ``serve --tcp`` and ``serve --socket`` listen on, opened before the server starts.

Everything that can be refused is refused here, with exit code 2 and a sentence on
stderr, before a socket accepts anyone: a bad address, a host beyond loopback
without ``--allow-remote``, an unreadable token file, a socket path that is taken.

``--tcp``: the host is resolved once and exactly its addresses are bound
(:mod:`exportlens.server.address`); the token comes from :mod:`exportlens.server.auth`.

``--socket PATH``: a Unix domain socket whose file has mode 0600 from the moment it
exists (the umask is narrowed around ``bind``: nothing else runs yet, so no other
file is created meanwhile), so only this user (and root) can connect; it needs no
token. A PATH that exists is replaced only when it is a socket nobody listens on (a
server that was killed); a live socket, or any other file, is refused. The file is
removed at exit if it is still the one this server made.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
import sys
from dataclasses import dataclass, field
from typing import Mapping, TextIO

from exportlens.server import address, auth

log = logging.getLogger(__name__)

BACKLOG = 16
PROBE_S = 2.0  # connecting to a socket file to see whether a server is behind it


class EndpointError(ValueError):
    """Cannot listen as asked: ``serve`` prints it and exits 2."""


@dataclass
class Endpoint:
    """Listening sockets, the token a client must show (None: ``--socket``), and
    the socket file to remove at exit."""

    sockets: list[socket.socket]
    shown: list[str]  # where it listens, as printed
    token: auth.Token | None = None
    unix_path: str | None = None
    _unix_id: tuple[int, int] | None = field(default=None, repr=False)
    warnings: list[str] = field(default_factory=list)

    @property
    def unix(self) -> bool:
        return self.unix_path is not None

    def announce(self, err: TextIO = sys.stderr) -> None:
        """Where the server listens, and what a client needs to connect."""
        for warning in self.warnings:
            print(f"exportlens serve: warning: {warning}", file=err)
        if self.token is not None and self.token.source == "generated":
            print(
                f"exportlens serve: no ${auth.ENV} and no --token-file: this run's token is\n"
                f"  {self.token.value}\n"
                f'Clients pass it in initialize: "initializationOptions": {{"exportlens": {{"token": "<the token>"}}}} (see docs/editors.md)',
                file=err,
            )
        # Last: a script that waits for this line has read everything above.
        print(f"exportlens serve: listening on {', '.join(self.shown)}" + (" (clients need the token)" if self.token else ""), file=err)
        err.flush()

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        if self.unix_path is not None and self._unix_id is not None:
            try:
                st = os.lstat(self.unix_path)
                if stat.S_ISSOCK(st.st_mode) and (st.st_dev, st.st_ino) == self._unix_id:
                    os.unlink(self.unix_path)
            except OSError:
                pass  # already gone, or replaced by someone else's file: not ours to remove
            self._unix_id = None


def open_endpoint(*, tcp: str | None, socket_path: str | None, token_file: str | None, allow_remote: bool, environ: Mapping[str, str]) -> Endpoint:
    """The bound sockets of ``--tcp`` or ``--socket``; EndpointError when refused."""
    if tcp is not None and socket_path is not None:
        raise EndpointError("--tcp and --socket are alternatives: give one")
    if socket_path is not None:
        if token_file is not None or allow_remote:
            raise EndpointError("--token-file and --allow-remote are options of --tcp: a --socket needs no token (the socket file's mode 0600 is the gate)")
        return open_unix(socket_path)
    if tcp is None:
        raise EndpointError("--token-file and --allow-remote are options of --tcp (on stdio the client is the editor that started the server: no token)")
    return open_tcp(tcp, token_file=token_file, allow_remote=allow_remote, environ=environ)


def open_tcp(text: str, *, token_file: str | None, allow_remote: bool, environ: Mapping[str, str]) -> Endpoint:
    try:
        host, port = address.split(text)
        token = auth.token_for(environ, token_file)  # before anything listens
        addresses = address.resolve(host, port)
    except (address.AddressError, auth.TokenError) as e:
        raise EndpointError(str(e)) from None
    refusal = address.refuse_remote(text, addresses)
    if refusal is not None and not allow_remote:
        raise EndpointError(refusal)
    bound = bind_tcp(addresses)
    endpoint = Endpoint([s for _, s in bound], [str(a) for a, _ in bound], token=token, warnings=list(token.warnings))
    warning = address.remote_warning([a for a, _ in bound])
    if warning is not None:
        endpoint.warnings.append(warning)
    return endpoint


def bind_tcp(addresses: list[address.Address]) -> list[tuple[address.Address, socket.socket]]:
    """A listening socket per address (port 0: the port the first one got, for all).
    An address that cannot be bound is skipped with a warning unless none can."""
    bound: list[tuple[address.Address, socket.socket]] = []
    port = addresses[0].port
    failures: list[str] = []
    for addr in addresses:
        sock = socket.socket(addr.family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if addr.family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # [::] must not take IPv4 unchecked
            sock.bind((addr.host, port))
            sock.listen(BACKLOG)
            sock.setblocking(False)
        except OSError as e:
            sock.close()
            failures.append(f"{addr.host}: {e.strerror or e}")
            continue
        if port == 0:
            port = sock.getsockname()[1]
        bound.append((address.Address(addr.family, addr.host, port), sock))
    if not bound:
        raise EndpointError(f"cannot listen on port {addresses[0].port} of {'; '.join(failures)}")
    for failure in failures:
        log.warning("not listening on %s", failure)
    return bound


def open_unix(path: str) -> Endpoint:
    path = os.path.abspath(path)
    _clear_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the file is born 0600: no moment where others may connect
    try:
        sock.bind(path)
    except OSError as e:
        sock.close()
        raise EndpointError(f"--socket {path}: cannot create the socket ({e.strerror or e})") from None
    finally:
        os.umask(old)
    try:
        os.chmod(path, 0o600)  # whatever bind made of the umask on this system
        st = os.lstat(path)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError as e:
        sock.close()
        raise EndpointError(f"--socket {path}: {e.strerror or e}") from None
    return Endpoint([sock], [path], unix_path=path, _unix_id=(st.st_dev, st.st_ino))


def _clear_stale(path: str) -> None:
    """Remove ``path`` when it is a socket no server listens on; refuse any other file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise EndpointError(f"--socket {path}: {e.strerror or e}") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise EndpointError(f"--socket {path}: the path exists and is not a socket; not replacing it (choose another path or remove it)")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(PROBE_S)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        pass  # nobody listens: left by a server that was killed
    except OSError as e:
        if e.errno not in (errno.ECONNREFUSED, errno.ENOENT):
            raise EndpointError(f"--socket {path}: an existing socket that cannot be checked ({e.strerror or e}); not replacing it") from None
    else:
        raise EndpointError(f"--socket {path}: another server is listening on this socket")
    finally:
        probe.close()
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise EndpointError(f"--socket {path}: a stale socket that cannot be removed ({e.strerror or e})") from None
    log.info("removed the stale socket %s", path)
