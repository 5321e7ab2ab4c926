"""registry.access.clientaddr: the client's address, from X-Forwarded-For only when the peer
is a trusted proxy, read from the right."""

from __future__ import annotations

import ipaddress

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from registry.access.clientaddr import (
    TRUSTED_PROXIES,
    TrustedProxies,
    client_address,
    peer_address,
)

LB = TrustedProxies([ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("::1/128")])


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        ("192.0.2.7", ["203.0.113.9"], "192.0.2.7"),  # a peer not trusted: its own address
        ("10.0.0.2", [], "10.0.0.2"),  # a proxy that says nothing
        ("10.0.0.2", ["203.0.113.9"], "203.0.113.9"),
        ("10.0.0.2", ["1.1.1.1, 203.0.113.9"], "203.0.113.9"),  # the client wrote 1.1.1.1
        ("10.0.0.2", ["1.1.1.1", "203.0.113.9, 10.0.0.3"], "203.0.113.9"),  # two proxies
        ("10.0.0.2", ["10.0.0.4, 10.0.0.3"], "10.0.0.4"),  # all trusted: the leftmost
        ("10.0.0.2", ["1.1.1.1, junk, 10.0.0.3"], "10.0.0.3"),  # garbage ends the walk
        ("::1", ["[2001:db8::5]:443"], "2001:db8::5"),
        ("::ffff:10.0.0.2", ["203.0.113.9:5678"], "203.0.113.9"),
        (None, ["203.0.113.9"], None),
    ],
)
def test_the_client_of_a_peer(peer: str | None, forwarded: list[str], client: str | None) -> None:
    assert LB.client(peer, forwarded) == client


def test_no_trusted_proxy_means_the_peer_always() -> None:
    assert TrustedProxies().client("10.0.0.2", ["203.0.113.9"]) == "10.0.0.2"


def test_a_request_worked_out_once_from_the_apps_setting() -> None:
    app = web.Application()
    app[TRUSTED_PROXIES] = LB
    request = make_mocked_request(
        "GET",
        "/",
        headers={"X-Forwarded-For": "203.0.113.9"},
        app=app,
        transport=_Transport("192.0.2.1"),
    )
    assert client_address(request) == "192.0.2.1"  # a peer not trusted
    trusted = make_mocked_request(
        "GET",
        "/",
        headers={"X-Forwarded-For": "203.0.113.9"},
        app=app,
        transport=_Transport("10.1.2.3"),
    )
    assert client_address(trusted) == "203.0.113.9"


@pytest.mark.parametrize(
    ("peer", "address"),
    [("ipv4:10.0.0.2:5050", "10.0.0.2"), ("ipv6:[::1]:5050", "::1"), ("unix:/tmp/s", None)],
)
def test_grpc_peers(peer: str, address: str | None) -> None:
    assert peer_address(peer) == address


class _Transport:
    def __init__(self, host: str) -> None:
        self.host = host

    def get_extra_info(self, name: str, default: object = None) -> object:
        return (self.host, 4321) if name == "peername" else default

    def is_closing(self) -> bool:
        return False
