"""``serve --tcp HOST:PORT``: the forms of the address, and which hosts are loopback."""

from __future__ import annotations

import socket

import pytest

from exportlens.server import address
from exportlens.server.address import Address, AddressError


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("127.0.0.1:8765", "127.0.0.1", 8765),
        ("localhost:8765", "localhost", 8765),
        ("[::1]:8765", "::1", 8765),
        ("::1:8765", "::1", 8765),
        (":8765", "127.0.0.1", 8765),
        ("127.0.0.1:0", "127.0.0.1", 0),
        ("0.0.0.0:65535", "0.0.0.0", 65535),
    ],
)
def test_the_forms_of_host_and_port(text: str, host: str, port: int) -> None:
    assert address.split(text) == (host, port)


@pytest.mark.parametrize("text", ["nonsense", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:²", "127.0.0.1:x", ""])
def test_a_bad_port_is_a_usage_error(text: str) -> None:
    with pytest.raises(AddressError, match="HOST:PORT"):
        address.split(text)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.5.6.7", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),  # IPv4-mapped
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("10.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("fe80::1%1", False),
        ("localhost", False),  # not numeric: names are resolved first
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert address.is_loopback(host) is loopback


def test_localhost_resolves_to_loopback_addresses_only() -> None:
    found = address.resolve("localhost", 0)
    assert found and all(a.loopback for a in found), found
    assert address.refuse_remote("localhost:0", found) is None


def test_a_wildcard_host_is_refused_with_the_reason() -> None:
    found = address.resolve("0.0.0.0", 8765)
    refusal = address.refuse_remote("0.0.0.0:8765", found)
    assert refusal is not None and "0.0.0.0 is not a loopback address" in refusal and "--allow-remote" in refusal
    warning = address.remote_warning(found)
    assert warning is not None and "NOT encrypted" in warning and "ssh -N -L 8765:127.0.0.1:8765" in warning


def test_a_name_that_does_not_resolve_is_a_usage_error() -> None:
    with pytest.raises(AddressError, match="cannot resolve"):
        address.resolve("no-such-host.invalid", 8765)


def test_addresses_print_as_clients_write_them() -> None:
    assert str(Address(socket.AF_INET, "127.0.0.1", 80)) == "127.0.0.1:80"
    assert str(Address(socket.AF_INET6, "::1", 80)) == "[::1]:80"
