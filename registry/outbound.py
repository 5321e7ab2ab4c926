"""aiohttp's client as the server uses it for outbound requests: the SSRF guard and the
operator's proxy (:mod:`registry.egress`) in one place.

* :func:`outbound_connector`: a ``TCPConnector`` whose resolver is the SSRF guard's
  (:class:`~registry.netguard.GuardedResolver`), the proxy's own address exempt from it; a
  kept-alive connection that receives bytes after its answer ended (while it waits in the
  pool) is closed, never reused: aiohttp would read them as the next request's answer.
* :func:`outbound_middlewares`: with a proxy, a client middleware that sends each request
  through it unless ``SWITCHBOARD_OUTBOUND_NO_PROXY`` lists the target, after judging the
  target with the guard (the proxy resolves the name again, so every address the name has
  must be allowed: :func:`~registry.netguard.check_host`). https targets go through
  ``CONNECT``, http ones in absolute form; ``Proxy-Authorization`` is aiohttp's.

Give both to every ``ClientSession`` (with ``trust_env=False``: the environment's proxy
variables are never read).
"""

from __future__ import annotations

import functools
import time
from typing import Any

import aiohttp
from aiohttp import ClientHandlerType, ClientMiddlewareType, ClientRequest, ClientResponse
from aiohttp.client_proto import ResponseHandler

from registry.egress import OutboundProxy
from registry.netguard import AddressPolicy, GuardedResolver, check_host

__all__ = ["JUDGED_FOR", "outbound_connector", "outbound_middlewares", "proxy_auth"]

JUDGED_FOR = 10.0
"""Seconds a proxied target the guard accepted is not resolved again (aiohttp's DNS cache)."""


def outbound_connector(
    policy: AddressPolicy | None, proxy: OutboundProxy | None, **options: Any
) -> aiohttp.TCPConnector:
    """A connector (``options`` as ``TCPConnector`` takes them) resolving through the guard of
    ``policy`` (none: aiohttp's resolver), ``proxy``'s own address exempt."""
    resolver = None
    if policy is not None:
        exempt = ((proxy.host, proxy.port),) if proxy is not None else ()
        resolver = GuardedResolver(policy, exempt=exempt)
    connector = aiohttp.TCPConnector(resolver=resolver, **options)
    factory = getattr(connector, "_factory", None)  # aiohttp makes each connection's protocol
    if isinstance(factory, functools.partial) and factory.func is ResponseHandler:
        connector._factory = functools.partial(_AnswerBound, *factory.args, **factory.keywords)
    return connector


class _AnswerBound(ResponseHandler):
    """aiohttp's protocol of one connection, closed when bytes come after the final answer to
    the request in flight has ended: they answer nothing (an agent answering twice, or late,
    to smuggle an answer into the next request on the kept-alive connection)."""

    _final: Any = None  # the body reader of the final answer to the request in flight

    def set_response_params(self, **params: Any) -> None:
        """A request begins on this connection (aiohttp calls this before sending it)."""
        self._final = None
        super().set_response_params(**params)

    def feed_data(self, data: Any, size: int = 0) -> None:
        """An answer's head parsed (``data``: the message and its body reader)."""
        message, payload = data
        if not 100 <= message.code < 200 or message.code == 101:  # not an interim answer
            self._final = payload
        super().feed_data(data, size)

    def data_received(self, data: bytes) -> None:
        """Bytes from the server: refused (the connection closed) once the answer is over."""
        if data and self._final is not None and self._final.is_eof():
            self.force_close()
            if self.transport is not None:
                self.transport.close()
            return
        super().data_received(data)


def proxy_auth(proxy: OutboundProxy) -> aiohttp.BasicAuth | None:
    """The proxy's credentials as aiohttp takes them (None without)."""
    if proxy.authorization is None:
        return None
    return aiohttp.BasicAuth.decode(proxy.authorization)


def outbound_middlewares(
    proxy: OutboundProxy | None, policy: AddressPolicy | None
) -> tuple[ClientMiddlewareType, ...]:
    """The middlewares of a session whose requests go through ``proxy`` (none without one);
    ``policy`` judges proxied targets before they are asked of the proxy."""
    if proxy is None:
        return ()
    auth = proxy_auth(proxy)
    judged: dict[tuple[str, int], float] = {}  # targets the guard accepted, until when

    async def through_proxy(req: ClientRequest, handler: ClientHandlerType) -> ClientResponse:
        via = proxy.via(req.url)
        if via is not None:
            if policy is not None:
                await _judge(policy, req.url.raw_host or "", _port(req), judged)
            req.update_proxy(via, auth, None)
        return await handler(req)

    return (through_proxy,)


def _port(req: ClientRequest) -> int:
    return req.url.port or (443 if req.url.scheme == "https" else 80)


async def _judge(
    policy: AddressPolicy, host: str, port: int, judged: dict[tuple[str, int], float]
) -> None:
    """:func:`check_host`, its acceptances remembered for :data:`JUDGED_FOR` seconds."""
    now = time.monotonic()
    key = (host, port)
    if judged.get(key, 0.0) > now:
        return
    await check_host(policy, host, port)
    if len(judged) >= 1024:
        judged.clear()
    judged[key] = now + JUDGED_FOR
