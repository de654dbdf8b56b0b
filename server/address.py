"""Where ``serve --tcp HOST:PORT`` listens, and whether that is this machine only.

A host is resolved once (``getaddrinfo``), and the server binds exactly the numeric
addresses found, so what was checked is what listens. It is loopback only when
every address is (``127.0.0.0/8``, ``::1``, or an IPv4-mapped loopback address);
``0.0.0.0``, ``::`` and any name that resolves elsewhere are not, and need
``--allow-remote``. Forms: ``localhost:8765``, ``127.0.0.1:8765``, ``[::1]:8765``
(and ``::1:8765``: the port is after the last colon), ``:8765`` (127.0.0.1). Port 0
asks for any free port; the one bound is printed.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

DEFAULT_HOST = "127.0.0.1"
USAGE = "--tcp expects HOST:PORT with a port from 0 (any free port) to 65535"


class AddressError(ValueError):
    """An address that cannot be listened on as asked (a usage error: exit 2)."""


@dataclass(frozen=True)
class Address:
    family: int  # socket.AF_INET or AF_INET6
    host: str  # numeric
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if self.family == socket.AF_INET6 else f"{self.host}:{self.port}"

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)


def split(text: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); brackets around an IPv6 host are removed."""
    host, colon, port = text.rpartition(":")
    if not colon or not (port.isascii() and port.isdigit() and int(port) <= 65535):
        raise AddressError(f"{USAGE}, got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or DEFAULT_HOST, int(port)


def is_loopback(host: str) -> bool:
    """Whether the numeric address ``host`` is a loopback address."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def resolve(host: str, port: int) -> list[Address]:
    """Every address ``host`` stands for (in the resolver's order, without repeats)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as e:
        raise AddressError(f"--tcp: cannot resolve the host {host!r} ({getattr(e, 'strerror', None) or e})") from None
    found: dict[Address, None] = {}
    for family, _, _, _, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6):
            found[Address(family, str(sockaddr[0]), port)] = None
    if not found:
        raise AddressError(f"--tcp: the host {host!r} has no IPv4 or IPv6 address")
    return list(found)


def refuse_remote(text: str, addresses: list[Address]) -> str | None:
    """Why listening on ``addresses`` without ``--allow-remote`` is refused, or None
    when they are all loopback."""
    remote = [a for a in addresses if not a.loopback]
    if not remote:
        return None
    shown = ", ".join(a.host for a in remote)
    return (
        f"--tcp {text}: {shown} is not a loopback address, so anyone who can reach this machine could connect and have "
        "the server run the model code of any file they open. Listen on 127.0.0.1 (the default host) and reach it "
        "through an SSH tunnel, or add --allow-remote (the token is still required; the traffic is not encrypted)"
    )


def remote_warning(addresses: list[Address]) -> str | None:
    """The warning of an ``--allow-remote`` server that listens beyond loopback."""
    remote = [a for a in addresses if not a.loopback]
    if not remote:
        return None
    port = remote[0].port
    return (
        f"listening beyond this machine on {', '.join(str(a) for a in remote)} (--allow-remote): whoever reaches it with the token "
        "can run code as you, and the traffic (the token, your files' text) is NOT encrypted. Prefer a loopback server "
        f"and an SSH tunnel from the client's machine: ssh -N -L {port or 'PORT'}:127.0.0.1:{port or 'PORT'} THIS-HOST"
    )
