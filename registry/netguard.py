"""SSRF guard: which addresses the crawler may connect to.

By default only globally routable unicast addresses are allowed; loopback, private, link-local
(including the cloud metadata address 169.254.169.254), CGNAT, multicast, reserved and
documentation ranges are refused. IPv6 addresses that embed an IPv4 address (IPv4-mapped,
NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``) are judged by that IPv4 address. Networks listed in
``SWITCHBOARD_ALLOW_NETWORKS`` are opened explicitly.

Two checkpoints share one :class:`AddressPolicy`:

* :meth:`AddressPolicy.check_url` vets the scheme, the host name's syntax, credentials
  (``user:password@`` is refused) and IP-literal hosts (aiohttp never calls the resolver for
  those); call it before every request and every redirect hop.
* :class:`GuardedResolver` is given to ``aiohttp.TCPConnector(resolver=...)``: it drops refused
  addresses from every DNS answer, so the address aiohttp connects to is the address checked.
* :func:`check_host` judges a target that the outbound proxy will resolve again: every
  address the name has must be allowed.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from yarl import URL

from registry.errors import CrawlError

__all__ = [
    "ALLOW_ENV",
    "AddressPolicy",
    "AddressRefused",
    "GuardedResolver",
    "address_kind",
    "check_host",
    "redact_url",
]

ALLOW_ENV = "SWITCHBOARD_ALLOW_NETWORKS"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_SCHEMES = frozenset({"http", "https"})
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$", re.IGNORECASE)
# One label of an (IDNA-encoded) host name; "_" is tolerated as resolvers accept it.
_HOST_LABEL = re.compile(r"^[a-z0-9_-]{1,63}$", re.IGNORECASE)
_MAX_HOST = 253
# Unparseable URLs: everything from "//" to the last "@" may be credentials.
_USERINFO_FALLBACK = re.compile(r"//.*@", re.DOTALL)

# (network, kind): ranges refused on top of what ``ipaddress`` says is not global.
_SPECIAL: tuple[tuple[Network, str], ...] = tuple(
    (ipaddress.ip_network(net), kind)
    for net, kind in (
        ("0.0.0.0/8", "unspecified"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "carrier-grade NAT"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "reserved"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "reserved"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "reserved"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/96", "reserved"),
        ("100::/64", "reserved"),
        ("2001::/23", "reserved"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("fc00::/7", "private"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "link-local"),
        ("ff00::/8", "multicast"),
    )
)


def _parse_ip(ip: str | IPAddress) -> IPAddress | None:
    if not isinstance(ip, str):
        return ip
    try:
        return ipaddress.ip_address(ip.strip("[]"))
    except ValueError:
        return None


def _embedded_ipv4(addr: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, if it embeds one."""
    if not isinstance(addr, ipaddress.IPv6Address):
        return None
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr in _NAT64:
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    return addr.sixtofour


def address_kind(ip: str | IPAddress) -> str | None:
    """Why an address is not globally routable ("loopback", "private", ...), or None if it is."""
    addr = _parse_ip(ip)
    if addr is None:
        return "not an IP address"
    addr = _embedded_ipv4(addr) or addr
    for network, kind in _SPECIAL:
        if addr in network:
            return kind
    if addr.is_multicast:
        return "multicast"
    if addr.is_reserved or addr.is_unspecified or not addr.is_global:
        return "reserved"
    return None


class AddressRefused(CrawlError):
    """The crawler refused to connect to an address (code ``address_refused``)."""

    code = "address_refused"

    @classmethod
    def build(
        cls, host: str, addresses: Iterable[str], url: str | None = None, *, also: bool = False
    ) -> AddressRefused:
        """An error naming the host, the refused addresses and how to open them (``also``:
        the host resolves to allowed addresses too, but the outbound proxy may pick any)."""
        addrs = list(dict.fromkeys(addresses))
        shown = ", ".join(f"{a} ({address_kind(a) or 'not allowed'})" for a in addrs)
        subject = f"Refusing to fetch {url}" if url else f"Refusing to connect to {host}"
        if also:
            message = (
                f"{subject} through the outbound proxy: {host} also resolves to {shown}, and "
                f"the proxy may connect to any of its addresses; add the network to {ALLOW_ENV} "
                "to allow it."
            )
            details = {"host": host, "addresses": addrs, "allow_env": ALLOW_ENV, "also": True}
            return cls(message, details={**details, **({"url": url} if url else {})})
        if _parse_ip(host) is not None:
            reason = f"{shown} is not a publicly routable address"
        else:
            reason = f"{host} resolves only to {shown}, which is not publicly routable"
        message = (
            f"{subject}: {reason}; add its network to {ALLOW_ENV} to allow it."
            if addrs
            else f"{subject}: {host} resolved to no address."
        )
        details = {"host": host, "addresses": addrs, "allow_env": ALLOW_ENV}
        if url:
            details["url"] = url
        return cls(message, details=details)

    def with_url(self, url: str) -> AddressRefused:
        """The same refusal, phrased for ``url`` (the resolver does not know the URL)."""
        details = self.details
        return self.build(details["host"], details["addresses"], url, also="also" in details)


class AddressPolicy:
    """Decides which IP addresses may be contacted: global unicast plus ``allow_networks``."""

    def __init__(self, allow_networks: Iterable[str | Network] = ()) -> None:
        self.allow_networks: tuple[Network, ...] = tuple(
            ipaddress.ip_network(net, strict=False) for net in allow_networks
        )

    def is_allowed(self, ip: str | IPAddress) -> bool:
        """True if ``ip`` is in an allowed network or is globally routable."""
        addr = _parse_ip(ip)
        if addr is None:
            return False
        inner = _embedded_ipv4(addr)
        candidates = (addr,) if inner is None else (addr, inner)
        if any(a in net for a in candidates for net in self.allow_networks):
            return True
        return address_kind(addr) is None

    def check_url(self, url: str | URL) -> URL:
        """Validate an URL to fetch: http(s) only, no credentials, a well-formed host, and an
        allowed address if the host is an IP literal.

        Returns the parsed URL without its fragment. Raises ``CrawlError`` code ``bad_url`` or
        :class:`AddressRefused`. Messages and details never show the URL's ``user:password@``.
        """
        text = str(url)
        shown = redact_url(url)
        try:
            parsed = url if isinstance(url, URL) else URL(text)
        except (ValueError, TypeError) as exc:
            raise _bad_url(shown, f"it cannot be parsed ({_redact_text(str(exc))})") from None
        if parsed.scheme.lower() not in _SCHEMES:
            scheme = parsed.scheme or "none"
            raise _bad_url(shown, f"the scheme is {scheme!r}, only http and https are allowed")
        if parsed.raw_user is not None or parsed.raw_password is not None:
            raise _bad_url(
                shown,
                "credentials (user:password@) in URLs are not accepted; remove them from the URL",
            )
        try:
            host = parsed.host
            raw_host = parsed.raw_host
        except (ValueError, TypeError):  # e.g. an "xn--" label that is not valid punycode
            raise _bad_url(shown, "its host name is not a valid (IDNA) host name") from None
        if not host or not raw_host:
            raise _bad_url(shown, "it has no host")
        addr = _parse_ip(host)
        if addr is None:
            problem = _host_name_problem(raw_host)
            if problem:
                raise _bad_url(shown, f"{host!r} is not a valid host name ({problem})")
            last_label = host.rstrip(".").rsplit(".", 1)[-1]
            if _NUMERIC_LABEL.match(last_label):
                raise _bad_url(shown, f"{host!r} is not a canonical IP address or host name")
        elif not self.is_allowed(addr):
            raise AddressRefused.build(host, [str(addr)], url=shown)
        return parsed.with_fragment(None)


def redact_url(url: str | URL) -> str:
    """``url`` as text without its ``user:password@`` part, for messages and logs.

    An URL that cannot be parsed has everything from ``//`` to its last ``@`` replaced by
    ``***``.
    """
    try:
        parsed = url if isinstance(url, URL) else URL(str(url))
        if parsed.raw_user is None and parsed.raw_password is None:
            return str(url)
        return str(parsed.with_user(None))
    except (ValueError, TypeError):
        return _redact_text(str(url))


def _redact_text(text: str) -> str:
    return _USERINFO_FALLBACK.sub("//***@", text, count=1)


def _host_name_problem(raw_host: str) -> str | None:
    """Why an ASCII (IDNA-encoded) host name is malformed, or None."""
    name = raw_host[:-1] if raw_host.endswith(".") else raw_host
    if len(name) > _MAX_HOST:
        return f"longer than {_MAX_HOST} characters"
    for label in name.split("."):
        if not label:
            return "empty label"
        if len(label) > 63:
            return "a label longer than 63 characters"
        if not _HOST_LABEL.match(label):
            return "only letters, digits, '-' and '_' are allowed"
    return None


def _bad_url(url: str, reason: str) -> CrawlError:
    """A ``bad_url`` error; ``url`` must already be redacted."""
    return CrawlError(
        f"Cannot fetch {url}: {reason}.",
        code="bad_url",
        details={"url": url, "reason": reason},
    )


class GuardedResolver(AbstractResolver):
    """An aiohttp resolver that removes refused addresses from every answer.

    Raises :class:`AddressRefused` when no address is left. The ``(host, port)`` pairs of
    ``exempt`` (the operator's outbound proxy) are resolved without the guard.
    """

    def __init__(
        self,
        policy: AddressPolicy,
        inner: AbstractResolver | None = None,
        *,
        exempt: Iterable[tuple[str, int]] = (),
    ) -> None:
        self.policy = policy
        self._inner = inner if inner is not None else DefaultResolver()
        self._exempt = frozenset((host.lower(), port) for host, port in exempt)

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Resolve ``host`` with the wrapped resolver and keep only allowed addresses."""
        results = await self._inner.resolve(host, port, family)
        if (host.lower(), port) in self._exempt:
            return results
        allowed = [r for r in results if self.policy.is_allowed(r["host"])]
        if not allowed:
            raise AddressRefused.build(host, [r["host"] for r in results])
        return allowed

    async def close(self) -> None:
        """Close the wrapped resolver."""
        await self._inner.close()


async def check_host(
    policy: AddressPolicy, host: str, port: int, resolver: AbstractResolver | None = None
) -> None:
    """Judge a target another party will resolve again (the outbound proxy): an IP literal
    must be allowed, and so must every address a host name resolves to now (``resolver``,
    default aiohttp's). Raises :class:`AddressRefused`, or ``CrawlError`` (``connect_failed``)
    when the name does not resolve here."""
    literal = _parse_ip(host)
    if literal is not None:
        if not policy.is_allowed(literal):
            raise AddressRefused.build(host, [str(literal)])
        return
    own = resolver is None
    resolver = DefaultResolver() if resolver is None else resolver
    try:
        results = await resolver.resolve(host, port, socket.AF_UNSPEC)
    except OSError:
        raise CrawlError(
            f"Cannot resolve {host}, which must be checked before the outbound proxy is asked "
            "for it.",
            code="connect_failed",
            details={"host": host, "reason": f"cannot resolve {host}"},
        ) from None
    finally:
        if own:
            await resolver.close()
    refused = [r["host"] for r in results if not policy.is_allowed(r["host"])]
    if not results or len(refused) == len(results):
        raise AddressRefused.build(host, refused)
    if refused:  # some allowed: the proxy, resolving again, may pick a refused one
        raise AddressRefused.build(host, refused, also=True)
