"""A lean HTTP/1.1 client for JSON-RPC calls and streams to agents: one request, one answer.

aiohttp's client builds request, response, reader and timer objects and runs its signal
hooks for every call; a routed call needs none of that. :class:`H1Pool` keeps keep-alive
connections per origin (scheme, host, port) as :class:`~router.forward.h1conn.H1Conn` objects,
which read answers with aiohttp's C HTTP parser: whole (:meth:`H1Pool.post`) or as they
arrive (:meth:`H1Pool.stream`). ``Accept-Encoding: identity`` is sent and a compressed answer
is refused, never inflated. A connection is reused only when its answer ended cleanly and
nothing came after it.

What it keeps from the aiohttp session it stands in for: the per-origin and total connection
limits, the wait for a free connection (``pool_timeout``), the connect and read timeouts (the
read timeout bounds every silence while an answer is awaited or read, not the whole call),
the SSRF guard (a host name is resolved and only the addresses the :class:`AddressPolicy`
allows are dialled; IP literals were checked with the URL), TLS with the system's verified
defaults, no redirects followed, no cookies. A request is never retried: a connection that
fails is closed, never returned to the pool, and the call fails.

With an :class:`~registry.egress.OutboundProxy` (``SWITCHBOARD_OUTBOUND_PROXY``), an origin
that ``SWITCHBOARD_OUTBOUND_NO_PROXY`` does not list is reached through it: its host judged
by the guard first (every address it resolves to must be allowed: the proxy resolves it
again), then an https origin through a ``CONNECT`` tunnel (TLS to the agent inside it, the
certificate checked against the agent's name), an http one with requests in absolute form
(``POST http://host/path``) on a keep-alive connection to the proxy. The proxy's own address
is never judged; its credentials go in ``Proxy-Authorization``.

Failures are raised as the exceptions :class:`router.forward.upstream.Upstream` already turns
into reasons (``TimeoutError``, ``aiohttp.ServerDisconnectedError``,
``aiohttp.ClientPayloadError``, :class:`OSError`, ``AddressRefused``) or as :class:`H1Error`
or :class:`~registry.egress.ProxyError` carrying the reason line itself.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ipaddress
import os
import socket
import ssl
from collections.abc import Awaitable, Iterable
from typing import Any

from yarl import URL

from registry.egress import OutboundProxy, connect_to_proxy, open_tunnel
from registry.netguard import AddressPolicy, AddressRefused, check_host
from router.forward.h1conn import H1Conn, H1Error, H1Response, SilenceWatch, TooLarge

__all__ = ["H1Error", "H1Pool", "H1Response", "H1Stream", "TooLarge"]

_IDLE_SECONDS = 15.0  # an idle pooled connection is closed after this (aiohttp's default)
_FORBIDDEN = ("\r", "\n", "\x00")


class _Origin:
    """The connections of one origin: idle ones and how many exist, and whether they go
    through the outbound proxy (``proxied``; ``absolute``: http requests in absolute form)."""

    __slots__ = ("absolute", "count", "idle", "proxied", "waiters")

    def __init__(self, proxied: bool = False, absolute: bool = False) -> None:
        self.idle: collections.deque[H1Conn] = collections.deque()
        self.count = 0  # open or opening connections, idle or busy
        self.waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self.proxied = proxied
        self.absolute = absolute


class H1Stream:
    """The body of a streamed answer, read as it arrives; :meth:`close` when done (the
    connection goes back to the pool if the body ended cleanly, else it is closed)."""

    __slots__ = ("_conn", "_origin", "_pool")

    def __init__(self, pool: H1Pool, origin: _Origin, conn: H1Conn) -> None:
        self._pool, self._origin, self._conn = pool, origin, conn

    def read(self) -> Awaitable[bytes]:
        """The next bytes of the body; b"" once it has ended (see :meth:`H1Conn.read`)."""
        pool = self._pool
        return self._conn.read(pool.read_timeout, pool.silences())

    def close(self, finished: bool = True) -> None:
        """Done with the answer (idempotent; its connection is kept only if the answer
        ended cleanly, whatever ``finished`` says)."""
        if self._origin is not None:
            origin, self._origin = self._origin, None
            self._pool._release(origin, self._conn)


class H1Pool:
    """Keep-alive HTTP/1.1 connections to agents (see the module docstring).

    ``per_origin_limit`` and ``total_limit`` bound the open connections (0: no bound); a call
    waits at most ``pool_timeout`` for a free one, then ``connect_timeout`` to connect.
    ``ssl_context`` replaces :func:`ssl.create_default_context` for https origins (and an
    https ``proxy``).
    """

    def __init__(
        self,
        *,
        connect_timeout: float,
        read_timeout: float,
        pool_timeout: float,
        per_origin_limit: int = 100,
        total_limit: int = 1000,
        max_body_bytes: int,
        policy: AddressPolicy | None = None,
        user_agent: str = "Switchboard",
        ssl_context: ssl.SSLContext | None = None,
        proxy: OutboundProxy | None = None,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.pool_timeout = pool_timeout
        self.per_origin_limit = per_origin_limit
        self.total_limit = total_limit
        self.max_body_bytes = max_body_bytes
        self.policy = policy
        self.user_agent = user_agent
        self.proxy = proxy
        self._origins: dict[tuple[str, str, int], _Origin] = {}
        self._total = 0
        self._ssl = ssl_context  # None: the system's verified defaults, made when first needed
        self._closed = False
        self._watch: SilenceWatch | None = None  # the silences of streams being read

    def silences(self) -> SilenceWatch:
        """The watch over the silences of this pool's streams (one timer for all)."""
        if self._watch is None:
            period = min(1.0, max(0.01, self.read_timeout / 10))
            self._watch = SilenceWatch(asyncio.get_running_loop(), period)
        return self._watch

    async def post(self, url: URL, headers: Iterable[tuple[str, str]], body: bytes) -> H1Response:
        """POST ``body`` to ``url`` (http or https, already checked) with ``headers`` (the
        framing ones excepted: Host, Content-Length, Connection are set here)."""
        origin = self._origin(url)
        data = _request(url, headers, body, self.user_agent, self._proxied(origin))
        conn = await self._acquire(origin, url)
        try:
            answer = await conn.request(data, self.read_timeout)
        finally:
            self._release(origin, conn)
        return answer

    async def stream(
        self, url: URL, headers: Iterable[tuple[str, str]], body: bytes
    ) -> tuple[H1Response, H1Stream]:
        """POST ``body`` to ``url`` as :meth:`post` does; the answer's head (its body empty)
        as soon as it arrives, and its body to read as it arrives."""
        origin = self._origin(url)
        data = _request(url, headers, body, self.user_agent, self._proxied(origin))
        conn = await self._acquire(origin, url)
        try:
            head = await conn.open(data, self.read_timeout)
        except BaseException:
            self._release(origin, conn)
            raise
        return head, H1Stream(self, origin, conn)

    async def close(self) -> None:
        """Close every pooled connection (those in use close when their call ends)."""
        self._closed = True
        if self._watch is not None:
            self._watch.close()
        for origin in self._origins.values():
            while origin.idle:
                origin.idle.popleft().close()
        self._origins.clear()

    # -- the pool ------------------------------------------------------------------------

    def _origin(self, url: URL) -> _Origin:
        key = (url.scheme, url.raw_host or "", url.port or 0)
        origin = self._origins.get(key)
        if origin is None:
            proxied = self.proxy is not None and self.proxy.via(url) is not None
            origin = _Origin(proxied, proxied and url.scheme == "http")
            self._origins[key] = origin
        return origin

    def _proxied(self, origin: _Origin) -> OutboundProxy | None:
        """The proxy an origin's requests are written for (absolute form), else None."""
        return self.proxy if origin.absolute else None

    async def _acquire(self, origin: _Origin, url: URL) -> H1Conn:
        while origin.idle:
            conn = origin.idle.pop()  # the most recently used: least likely to be stale
            if conn.idle_handle is not None:
                conn.idle_handle.cancel()
                conn.idle_handle = None
            if not conn.closed:
                return conn
            self._drop(origin)
        if not self._room(origin) and not self._evict_idle(origin):
            await self._wait(origin)
            if origin.idle:
                return await self._acquire(origin, url)
        origin.count += 1
        self._total += 1
        try:
            if origin.proxied:
                return await self._connect_through_proxy(url)
            return await self._connect(url)
        except BaseException:
            self._drop(origin)
            raise

    def _room(self, origin: _Origin) -> bool:
        return (not self.per_origin_limit or origin.count < self.per_origin_limit) and (
            not self.total_limit or self._total < self.total_limit
        )

    def _evict_idle(self, origin: _Origin) -> bool:
        """Close another origin's oldest idle connection when only the total limit stands in
        ``origin``'s way (as aiohttp's connector does); whether there is room now."""
        if self.per_origin_limit and origin.count >= self.per_origin_limit:
            return False
        for other in self._origins.values():
            if other is not origin and other.idle:
                conn = other.idle.popleft()
                conn.close()
                self._drop(other)
                return self._room(origin)
        return False

    async def _wait(self, origin: _Origin) -> None:
        """Wait for a connection of ``origin`` to be released or closed, or (under the total
        limit) for another origin's to go idle, then closed to make room."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.pool_timeout
        woken = False
        while not self._room(origin) and not origin.idle and not self._evict_idle(origin):
            waiter: asyncio.Future[None] = loop.create_future()
            if woken:  # woken from the front for nothing (another took it): keep that place
                origin.waiters.appendleft(waiter)
            else:
                origin.waiters.append(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    await waiter
            except BaseException as exc:
                if waiter.done() and not waiter.cancelled():
                    self._pass_on(origin)  # woken, then cancelled or timed out: pass it on
                if isinstance(exc, TimeoutError):
                    raise H1Error(
                        f"no free connection to the agent within {self.pool_timeout:g} s"
                        f" ({origin.count} open to it, {self._total} in all)"
                    ) from None
                raise
            finally:
                with contextlib.suppress(ValueError):
                    origin.waiters.remove(waiter)
            woken = True

    def _release(self, origin: _Origin, conn: H1Conn) -> None:
        if conn.reusable and not self._closed:
            origin.idle.append(conn)
            conn.idle_handle = asyncio.get_running_loop().call_later(
                _IDLE_SECONDS, self._expire, origin, conn
            )
            self._pass_on(origin)
        else:
            conn.close()
            self._drop(origin)

    def _expire(self, origin: _Origin, conn: H1Conn) -> None:
        conn.idle_handle = None
        with contextlib.suppress(ValueError):
            origin.idle.remove(conn)
            conn.close()
            self._drop(origin)

    def _drop(self, origin: _Origin) -> None:
        """One connection of ``origin`` is gone."""
        origin.count -= 1
        self._total -= 1
        self._pass_on(origin)

    def _pass_on(self, origin: _Origin) -> None:
        """A connection of ``origin`` was released or closed: wake a call waiting for it and,
        under a total limit, one of each other origin (it may close the idle connection)."""
        self._wake(origin)
        if self.total_limit:
            for other in self._origins.values():
                if other is not origin:
                    self._wake(other)

    def _wake(self, origin: _Origin) -> None:
        while origin.waiters:
            waiter = origin.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    # -- connecting ----------------------------------------------------------------------

    async def _connect(self, url: URL) -> H1Conn:
        loop = asyncio.get_running_loop()
        host, port = url.raw_host or "", url.port or (443 if url.scheme == "https" else 80)
        tls = self._context() if url.scheme == "https" else None
        step = f"resolving {host}"
        try:
            async with asyncio.timeout(self.connect_timeout):
                addresses = await self._addresses(loop, host, port)
                step = f"connecting to {host}:{port}"
                failure: OSError | None = None
                for family, address in addresses:
                    try:
                        _, conn = await loop.create_connection(
                            lambda: H1Conn(loop, self.max_body_bytes),
                            host=address,
                            port=port,
                            family=family,
                            ssl=tls,
                            # the IDNA-encoded name that was resolved and dialled (url.host
                            # is the decoded, Unicode one): the name the certificate must match
                            server_hostname=host if tls is not None else None,
                        )
                    except ssl.SSLCertVerificationError:
                        raise H1Error("TLS certificate verification failed") from None
                    except OSError as exc:
                        failure = exc
                        continue
                    _nodelay(conn.transport)
                    return conn
        except TimeoutError:
            limit = f"connect timeout {self.connect_timeout:g} s"
            raise H1Error(f"timed out {step} ({limit})") from None
        reason = _os_text(failure)
        raise H1Error(f"cannot connect to {host}:{port}: {reason}")

    async def _connect_through_proxy(self, url: URL) -> H1Conn:
        """A connection to ``url``'s origin through the outbound proxy (the module docs)."""
        loop, proxy = asyncio.get_running_loop(), self.proxy
        assert proxy is not None
        host, port = url.raw_host or "", url.port or (443 if url.scheme == "https" else 80)
        step = f"resolving {host}"
        try:
            async with asyncio.timeout(self.connect_timeout):
                if self.policy is not None:
                    await check_host(self.policy, host, port)
                step = f"connecting to {host}:{port} through the outbound proxy {proxy.shown}"
                if url.scheme == "http":
                    return await self._dial_proxy(loop, proxy)
                tunnel = await open_tunnel(
                    proxy, host, port, proxy_ssl=self._context(), user_agent=self.user_agent
                )
                conn = H1Conn(loop, self.max_body_bytes)
                try:
                    tls = await loop.start_tls(tunnel, conn, self._context(), server_hostname=host)
                except ssl.SSLCertVerificationError:
                    tunnel.close()
                    raise H1Error("TLS certificate verification failed") from None
                except BaseException:
                    tunnel.close()
                    raise
                conn.connection_made(tls)
                _nodelay(tls)
                return conn
        except TimeoutError:
            limit = f"connect timeout {self.connect_timeout:g} s"
            raise H1Error(f"timed out {step} ({limit})") from None

    async def _dial_proxy(self, loop: asyncio.AbstractEventLoop, proxy: OutboundProxy) -> H1Conn:
        """A keep-alive connection to the proxy itself, for requests in absolute form."""
        tls = self._context() if proxy.tls else None
        _, conn = await connect_to_proxy(proxy, lambda: H1Conn(loop, self.max_body_bytes), tls)
        _nodelay(conn.transport)
        return conn

    async def _addresses(
        self, loop: asyncio.AbstractEventLoop, host: str, port: int
    ) -> list[tuple[int, str]]:
        """The addresses to dial for ``host`` (the allowed ones, when guarded). An IP literal
        is dialled as it is: no resolver thread, so a busy default executor (embedding, a
        model load) cannot hold up a call to an agent on an IP address."""
        literal = _ip_literal(host)
        if literal is not None:
            if self.policy is not None and not self.policy.is_allowed(literal[1]):
                raise AddressRefused.build(host, [literal[1]])
            return [literal]
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror:
            raise H1Error(f"cannot resolve {host}") from None
        found = [(int(family), str(sockaddr[0])) for family, _, _, _, sockaddr in infos]
        unique = list(dict.fromkeys(found))
        if self.policy is None:
            return unique
        allowed = [(f, a) for f, a in unique if self.policy.is_allowed(a)]
        if not allowed:
            raise AddressRefused.build(host, [a for _, a in unique])
        return allowed

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl


def _request(
    url: URL,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    agent: str,
    proxy: OutboundProxy | None = None,
) -> bytes:
    """The request's bytes: ``POST`` with ``headers`` (checked for line breaks) and ``body``;
    for a ``proxy`` (plain http through it), in absolute form with its credentials."""
    target = url.raw_path_qs or "/"
    if proxy is not None:
        target = f"http://{_host_header(url)}{target}"
    lines = [f"POST {target} HTTP/1.1", f"Host: {_host_header(url)}"]
    if proxy is not None and proxy.authorization:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    has_agent = False
    for name, value in headers:
        if any(c in name or c in value for c in _FORBIDDEN) or not name:
            raise ValueError(f"header {name!r} holds a line break or NUL")
        has_agent = has_agent or name.lower() == "user-agent"
        lines.append(f"{name}: {value}")
    if not has_agent:
        lines.append(f"User-Agent: {agent}")
    lines.append("Accept-Encoding: identity")
    lines.append(f"Content-Length: {len(body)}\r\n\r\n")
    return "\r\n".join(lines).encode("utf-8") + body


def _ip_literal(host: str) -> tuple[int, str] | None:
    """``(family, address)`` when ``host`` is an IPv4 or IPv6 literal (brackets stripped)."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    return int(family), str(address)


def _host_header(url: URL) -> str:
    host = url.raw_host or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    if url.explicit_port and not url.is_default_port():
        return f"{host}:{url.port}"
    return host


def _nodelay(transport: Any) -> None:
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _os_text(exc: OSError | None) -> str:
    if exc is None or not exc.errno:
        return "connection failed"
    return os.strerror(exc.errno).lower()
