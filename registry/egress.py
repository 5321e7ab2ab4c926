"""The way out: the operator's HTTP proxy for every outbound request of the server.

``SWITCHBOARD_OUTBOUND_PROXY`` names an ``http://`` or ``https://`` forward proxy, optionally
with ``user:password@`` (sent as ``Proxy-Authorization: Basic``, never logged or shown);
``SWITCHBOARD_OUTBOUND_NO_PROXY`` lists what is reached directly, in the usual ``NO_PROXY``
syntax (:class:`NoProxy`). Nothing here reads ``HTTP_PROXY``, ``HTTPS_PROXY`` or ``NO_PROXY``.

:class:`OutboundProxy` says which proxy a URL goes through (:meth:`OutboundProxy.via`), and
:func:`open_tunnel` opens an HTTP ``CONNECT`` tunnel through it (https targets, gRPC health
probes). Plain ``http`` targets are asked of the proxy in absolute form (``POST
http://host/path``). The aiohttp side is :mod:`registry.outbound`; the router's own client
(:mod:`router.forward.h1client`) uses this module directly.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar
from urllib.parse import unquote

from yarl import URL

__all__ = [
    "NO_PROXY_ENV",
    "PROXY_ENV",
    "NoProxy",
    "OutboundProxy",
    "ProxyError",
    "check_no_proxy",
    "check_proxy_url",
    "connect_to_proxy",
    "open_tunnel",
]

PROXY_ENV = "SWITCHBOARD_OUTBOUND_PROXY"
NO_PROXY_ENV = "SWITCHBOARD_OUTBOUND_NO_PROXY"

_MAX_HEAD = 1 << 16  # bytes of a proxy's answer to CONNECT
P = TypeVar("P", bound=asyncio.BaseProtocol)


class ProxySettings(Protocol):
    """The settings this module reads (:class:`registry.settings.Settings` has them)."""

    outbound_proxy: str | None
    outbound_no_proxy: list[str]


class ProxyError(OSError):
    """The proxy could not be reached or refused a tunnel; :attr:`reason` says so in one line
    (never with the proxy's credentials)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def check_proxy_url(text: str) -> str:
    """``text`` if it is a usable proxy URL: ``http`` or ``https``, a host, at most a port, a
    ``user:password@``, and a path of ``/``. ValueError otherwise, its message never showing
    the credentials."""
    try:
        url = URL(text.strip())
        host, port = url.host, url.port
    except (ValueError, TypeError):
        raise ValueError("the outbound proxy is not a URL") from None
    if url.scheme not in ("http", "https"):
        raise ValueError("the outbound proxy must be an http:// or https:// URL")
    if not host:
        raise ValueError("the outbound proxy URL has no host")
    if url.raw_path not in ("", "/") or url.raw_query_string or url.raw_fragment:
        raise ValueError("the outbound proxy URL must be scheme://[user:password@]host[:port]")
    if port is None or not 0 < port < 65536:
        raise ValueError("the outbound proxy URL has no valid port")
    return text.strip()


def check_no_proxy(entries: Iterable[str]) -> list[str]:
    """The entries of a ``NO_PROXY`` list, each checked (ValueError naming the bad one)."""
    out = [entry.strip() for entry in entries if entry.strip()]
    for entry in out:
        _rule(entry)
    return out


@dataclass(frozen=True)
class _Rule:
    """One ``NO_PROXY`` entry: every host, a domain, or an address or network."""

    domain: str | None = None  # "example.com": it and its subdomains
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    port: int | None = None  # only this port, when given
    everything: bool = False

    def matches(self, host: str, ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None,
                port: int) -> bool:  # fmt: skip
        if self.port is not None and port != self.port:
            return False
        if self.everything:
            return True
        if self.network is not None:
            return ip is not None and ip in self.network
        assert self.domain is not None
        return host == self.domain or host.endswith("." + self.domain)


def _rule(entry: str) -> _Rule:
    text = entry.strip().lower()
    if text == "*":
        return _Rule(everything=True)
    bracketed = text.startswith("[") and text.endswith("]")
    for candidate in (text[1:-1],) if bracketed else (text,):
        try:
            return _Rule(network=ipaddress.ip_network(candidate, strict=False))
        except ValueError:
            pass
    port: int | None = None
    if text.startswith("["):  # [v6]:port
        inside, _, rest = text[1:].partition("]")
        text, port = inside, _port(rest.removeprefix(":"), entry)
        try:
            return _Rule(network=ipaddress.ip_network(text, strict=False), port=port)
        except ValueError:
            raise ValueError(f"{entry!r} is not a host, domain, address or network") from None
    if text.count(":") == 1:
        text, _, digits = text.partition(":")
        port = _port(digits, entry)
    if text == "*":
        return _Rule(everything=True, port=port)
    try:
        return _Rule(network=ipaddress.ip_network(text, strict=False), port=port)
    except ValueError:
        pass
    domain = text.removeprefix("*").lstrip(".").rstrip(".")
    labels = domain.split(".")
    if not domain or not all(label and label.replace("-", "").replace("_", "").isalnum()
                             for label in labels):  # fmt: skip
        raise ValueError(f"{entry!r} is not a host, domain, address or network")
    return _Rule(domain=domain, port=port)


def _port(digits: str, entry: str) -> int:
    if not digits.isdigit() or not 0 < int(digits) < 65536:
        raise ValueError(f"{entry!r} has no valid port")
    return int(digits)


class NoProxy:
    """What goes around the proxy, in the usual ``NO_PROXY`` syntax: ``*`` (everything), a
    host or domain (``example.com``, ``.example.com`` and ``*.example.com`` all match the name
    and every name under it), an IP address or a CIDR network (matching URLs whose host is
    such an address, as curl and Go read it: host names are never resolved for this), each
    optionally with ``:port`` (then only that port; ``[v6]:port`` for IPv6)."""

    def __init__(self, entries: Iterable[str] = ()) -> None:
        self.entries = check_no_proxy(entries)
        self._rules = tuple(_rule(entry) for entry in self.entries)

    def matches(self, host: str, port: int) -> bool:
        """Whether a URL with this host and port is reached directly."""
        if not self._rules:
            return False
        name = host.strip("[]").lower().rstrip(".")
        try:
            ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(name)
        except ValueError:
            ip = None
        return any(rule.matches(name, ip, port) for rule in self._rules)


@dataclass(frozen=True)
class OutboundProxy:
    """The operator's proxy: its URL without credentials, the ``Proxy-Authorization`` value
    they make, and what goes around it."""

    url: URL
    authorization: str | None = field(default=None, repr=False)
    no_proxy: NoProxy = field(default_factory=NoProxy)
    _credentials: str | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, text: str, no_proxy: Iterable[str] = ()) -> OutboundProxy:
        """The proxy of a URL such as ``http://user:secret@proxy.corp:3128``."""
        url = URL(check_proxy_url(text))
        authorization = credentials = None
        if url.raw_user is not None:
            user, password = unquote(url.raw_user), unquote(url.raw_password or "")
            pair = f"{user}:{password}".encode()
            authorization = "Basic " + base64.b64encode(pair).decode("ascii")
            credentials = url.raw_user + (f":{url.raw_password}" if url.raw_password else "")
        bare = URL(f"{url.scheme}://{url.host_subcomponent}:{url.port}")
        return cls(bare, authorization, NoProxy(no_proxy), credentials)

    @classmethod
    def from_settings(cls, settings: ProxySettings) -> OutboundProxy | None:
        """The proxy the settings name, or None (every request direct)."""
        if not settings.outbound_proxy:
            return None
        return cls.parse(settings.outbound_proxy, settings.outbound_no_proxy)

    @property
    def host(self) -> str:
        """The proxy's host (an IPv6 address without brackets)."""
        return self.url.raw_host or ""

    @property
    def port(self) -> int:
        """The proxy's port (80 or 443 when the URL names none)."""
        return self.url.port or 0

    @property
    def tls(self) -> bool:
        """Whether the connection to the proxy itself is TLS (an ``https://`` proxy)."""
        return self.url.scheme == "https"

    @property
    def shown(self) -> str:
        """The proxy as messages and logs name it: its URL without credentials."""
        return str(self.url)

    def with_credentials(self) -> str:
        """The proxy URL with its ``user:password@``, for a client that takes only that (pip,
        grpcio): never to be logged or shown."""
        if self._credentials is None:
            return str(self.url)
        return str(self.url).replace("://", f"://{self._credentials}@", 1)

    def scrub(self, text: str) -> str:
        """``text`` (a child process's output) without this proxy's credentials."""
        if self._credentials is None:
            return text
        for secret in {self._credentials, unquote(self._credentials)}:
            text = text.replace(secret, "***")
        return text

    def via(self, url: URL) -> URL | None:
        """The proxy ``url`` goes through, or None when it is reached directly."""
        host = url.raw_host or ""
        port = url.port or (443 if url.scheme in ("https", "grpcs") else 80)
        return None if self.no_proxy.matches(host, port) else self.url

    def is_proxy(self, host: str, port: int) -> bool:
        """Whether ``host:port`` is the proxy itself (exempt from the address guard)."""
        return host.strip("[]").lower() == self.host.lower() and port == self.port

    def environment(self) -> dict[str, str]:
        """Proxy variables for a child process that reads them (pip): this proxy for http
        and https, and ``NO_PROXY`` (in both spellings)."""
        whole = self.with_credentials()
        skip = ",".join(self.no_proxy.entries)
        names = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
        values = (whole, whole, skip)
        return {
            **dict(zip(names, values, strict=True)),
            **{n.lower(): v for n, v in zip(names, values, strict=True)},
        }


def authority(host: str, port: int) -> str:
    """``host:port`` for a request line or ``Host`` header (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _Opening(asyncio.Protocol):
    """The proxy's answer to ``CONNECT``, read up to its blank line."""

    def __init__(self, answered: asyncio.Future[bytes]) -> None:
        self.answered = answered
        self.head = bytearray()

    def data_received(self, data: bytes) -> None:
        self.head += data
        if self.answered.done():
            return
        if b"\r\n\r\n" in self.head:
            self.answered.set_result(bytes(self.head))
        elif len(self.head) > _MAX_HEAD:
            self.answered.set_exception(ProxyError("the outbound proxy's answer is too long"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.answered.done():
            self.answered.set_exception(
                ProxyError("the outbound proxy closed the connection before opening the tunnel")
            )


async def connect_to_proxy(
    proxy: OutboundProxy,
    protocol_factory: Callable[[], P],
    tls: ssl.SSLContext | None,
) -> tuple[asyncio.Transport, P]:
    """A connection to the proxy itself (over TLS with ``tls``, an ``https://`` proxy's);
    ProxyError, saying why, when it cannot be made."""
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.create_connection(
            protocol_factory,
            proxy.host,
            proxy.port,
            ssl=tls,
            server_hostname=proxy.host if tls is not None else None,
        )
    except ssl.SSLCertVerificationError:
        raise ProxyError(
            f"the outbound proxy {proxy.shown}: TLS certificate verification failed"
        ) from None
    except OSError as exc:
        raise ProxyError(
            f"cannot connect to the outbound proxy {proxy.shown}: {_os_text(exc)}"
        ) from None
    return transport, protocol


async def open_tunnel(
    proxy: OutboundProxy,
    host: str,
    port: int,
    *,
    proxy_ssl: ssl.SSLContext | None = None,
    user_agent: str = "Switchboard",
) -> asyncio.Transport:
    """A connection to ``host:port`` through the proxy (HTTP ``CONNECT``), its transport ready
    for bytes (for TLS: ``loop.start_tls`` with the target's name). ``proxy_ssl`` is the TLS
    context of an ``https://`` proxy (default: the system's verified one). ProxyError when
    the proxy cannot be reached or does not answer 2xx; the caller bounds the time."""
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[bytes] = loop.create_future()
    tls = (proxy_ssl or ssl.create_default_context()) if proxy.tls else None
    transport, _ = await connect_to_proxy(proxy, lambda: _Opening(answered), tls)
    target = authority(host, port)
    lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}", f"User-Agent: {user_agent}"]
    if proxy.authorization:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("utf-8"))
    try:
        head = await answered
        status, reason = _status(head)
        if not 200 <= status < 300:
            raise ProxyError(
                f"the outbound proxy refused the tunnel to {target}: HTTP {status} {reason}"[:300]
            )
        if not head.endswith(b"\r\n\r\n") or head.count(b"\r\n\r\n") != 1:
            raise ProxyError("the outbound proxy sent bytes after its answer to CONNECT")
    except BaseException:
        transport.close()
        raise
    return transport  # type: ignore[return-value]  # uvloop's transports are not subclasses


def _status(head: bytes) -> tuple[int, str]:
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    version, _, rest = line.partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or not (code.isdigit() and len(code) == 3):
        raise ProxyError("the outbound proxy's answer to CONNECT is not HTTP")
    return int(code), reason.strip()


def _os_text(exc: OSError) -> str:
    if isinstance(exc, ProxyError):
        return exc.reason
    return (exc.strerror or str(exc) or type(exc).__name__).lower()
