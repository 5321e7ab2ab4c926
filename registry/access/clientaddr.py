"""The address a request comes from: the peer of its connection, or, when that peer is a
proxy the operator trusts (``SWITCHBOARD_TRUSTED_PROXIES``), the address the proxies report
in ``X-Forwarded-For``.

The header is read from the right (the hop nearest to Switchboard) to the left: each address
a trusted proxy reports is taken, and the first one that is not itself a trusted proxy is
the client. Whatever a client writes into the header itself is to the left of that and never
read, so a client cannot choose its own address; a peer that is not trusted is the client
whatever its headers say. An entry that is not an IP address ends the walk (the last trusted
hop is then the client). The access log, the failed-authentication throttle and the admin
API's authentication all use :func:`client_address`, so they agree.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from aiohttp import web

__all__ = [
    "FORWARDED_FOR",
    "TRUSTED_PROXIES",
    "TrustedProxies",
    "client_address",
    "peer_address",
]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
FORWARDED_FOR = "X-Forwarded-For"


class TrustedProxies:
    """The networks whose peers' ``X-Forwarded-For`` is believed (none: never)."""

    def __init__(self, networks: Iterable[Network] = ()) -> None:
        self.networks = tuple(networks)

    def trusts(self, address: str) -> bool:
        """Whether ``address`` (an IP address as text) is in a trusted network."""
        parsed = _parse(address)
        return parsed is not None and any(parsed in network for network in self.networks)

    def client(self, peer: str | None, forwarded: Iterable[str]) -> str | None:
        """The client's address: ``peer`` (the connection's), or, when it is trusted, the
        rightmost address of the ``forwarded`` header values (in the order received) that is
        not trusted (the leftmost, when all are)."""
        if peer is None or not self.networks or not self.trusts(peer):
            return peer
        hops = [hop.strip() for value in forwarded for hop in value.split(",")]
        client = peer
        for hop in reversed(hops):
            parsed = _parse(hop)
            if parsed is None:
                break  # garbage: only the trusted hop that passed it on is known
            client = str(parsed)
            if not any(parsed in network for network in self.networks):
                break
        return client


TRUSTED_PROXIES = web.AppKey("trusted_proxies", TrustedProxies)
_CLIENT: web.RequestKey[str | None] = web.RequestKey("client_address")


def client_address(request: web.BaseRequest) -> str | None:
    """The address ``request`` comes from (see the module docstring); worked out once per
    request. A request aiohttp answers itself (a malformed one) is its peer's."""
    if _CLIENT in request:
        return request[_CLIENT]
    peer = request.remote
    proxies = _proxies(request)
    if proxies is not None and proxies.networks:
        address = proxies.client(peer, request.headers.getall(FORWARDED_FOR, ()))
    else:
        address = peer
    request[_CLIENT] = address
    return address


def peer_address(peer: str) -> str | None:
    """The IP address of a gRPC peer (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``), else None."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0] or None
    if kind == "ipv6":
        host = rest.rpartition(":")[0]
        return host.strip("[]").partition("%")[0] or None
    return None


def _proxies(request: web.BaseRequest) -> TrustedProxies | None:
    try:
        app: Any = request.config_dict  # type: ignore[attr-defined]
    except (AttributeError, AssertionError):  # a request the app never saw
        return None
    proxies = app.get(TRUSTED_PROXIES)
    return proxies if isinstance(proxies, TrustedProxies) else None


def _parse(text: str) -> Address | None:
    """An address as proxies write it: ``1.2.3.4``, ``::1``, ``[::1]``, ``1.2.3.4:80``,
    ``[::1]:80``; IPv4-mapped IPv6 read as IPv4; None for anything else."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text.partition("%")[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address
