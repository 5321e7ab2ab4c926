"""Who may call the A2A endpoints: a request's caller authenticated and its rate checked
before anything of the call is read.

With client authentication on (``SWITCHBOARD_CLIENT_AUTH``), a request without credentials, or
with credentials that do not prove who is calling, is answered HTTP 401 with
``WWW-Authenticate`` and a JSON-RPC error ``-32054`` (``UNAUTHENTICATED``); a caller over its
rate (``SWITCHBOARD_RATE_LIMIT_RPS``) or its open streams (``SWITCHBOARD_RATE_LIMIT_STREAMS``)
gets HTTP 429 with ``Retry-After`` and ``-32055`` (``RATE_LIMITED``). A client address whose
requests failed authentication more than ``SWITCHBOARD_RATE_LIMIT_AUTH_FAILURES`` a second
(:mod:`registry.access.throttle`) gets the same 429 instead of its next 401s; valid
credentials are never throttled so. Limits hold per process. With authentication off every
caller is :data:`~registry.access.principal.ANONYMOUS` (one rate bucket for all, if a rate is
set).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

from aiohttp import web

from registry.access.authenticate import Authenticator
from registry.access.clientaddr import FORWARDED_FOR, TrustedProxies, client_address
from registry.access.errors import AuthError
from registry.access.principal import ANONYMOUS, Principal
from registry.access.throttle import FailureThrottle
from router.protocol.errors import RATE_LIMITED, UNAUTHENTICATED, RpcError, error_body
from router.protocol.versions import VERSION_HEADER, Version

__all__ = ["GATE", "Denied", "Gate", "Limits", "Refused"]


class Limits(Protocol):
    """Per-caller limits (:class:`router.transport.ratelimit.CallerLimits`)."""

    def take(self, key: str) -> float | None:
        """None when a request is allowed now, else the seconds until one would be."""
        ...

    def open_stream(self, key: str) -> bool:
        """Take a stream slot; False when the caller holds its most streams."""
        ...

    def close_stream(self, key: str) -> None:
        """Give a stream slot back."""
        ...


class Denied(Exception):
    """A caller refused by :meth:`Gate.check` or :meth:`Gate.take_stream`: the ``error`` to
    answer with, the HTTP ``status`` it means (401, 503 or 429) and the ``headers`` to add
    (``WWW-Authenticate``, ``Retry-After``); each transport answers it in its own binding."""

    def __init__(self, error: RpcError, status: int, headers: dict[str, str]) -> None:
        super().__init__(error.message)
        self.error = error
        self.status = status
        self.headers = headers


class Refused(Exception):
    """The request is answered with :attr:`response` and goes no further."""

    def __init__(self, response: web.Response) -> None:
        super().__init__(response.status)
        self.response = response


class Gate:
    """Authentication and rate limits in front of the A2A endpoints; ``failures`` throttles
    the failed authentications of each client address (None: not at all), ``proxies`` says
    whose ``X-Forwarded-For`` names the client."""

    def __init__(
        self,
        authenticator: Authenticator,
        limits: Limits | None = None,
        *,
        failures: FailureThrottle | None = None,
        proxies: TrustedProxies | None = None,
    ) -> None:
        self.authenticator = authenticator
        self.limits = limits
        self.failures = failures
        self.proxies = proxies or TrustedProxies()

    async def admit(self, request: web.Request) -> Principal:
        """The caller of ``request``; :class:`Refused` (401, 503 or 429) when it may not call."""
        try:
            return await self.check(request.headers, client_address(request))
        except Denied as denied:
            raise Refused(_answer(request, denied)) from None

    def client(self, peer: str | None, headers: Mapping[str, str]) -> str | None:
        """The client address of a request from ``peer`` with ``headers`` (for a transport
        without aiohttp's request: gRPC)."""
        getall = getattr(headers, "getall", None)  # a multidict: every such header in order
        if getall is not None:
            return self.proxies.client(peer, getall(FORWARDED_FOR, ()))
        forwarded = headers.get(FORWARDED_FOR.lower()) or headers.get(FORWARDED_FOR)
        return self.proxies.client(peer, [forwarded] if forwarded else [])

    async def check(self, headers: Mapping[str, str], client: str | None = None) -> Principal:
        """The caller whose credentials ``headers`` carry (any transport's: HTTP headers, gRPC
        metadata), its rate taken; :class:`Denied` when it may not call. ``client``: the
        address the request comes from (its failed authentications are throttled)."""
        caller = ANONYMOUS
        if self.authenticator.client_auth:
            try:
                found = await self.authenticator.authenticate(headers)
            except AuthError as error:
                raise self._failed(client, error.reason, error.message) from None
            if found is None:
                raise self._failed(
                    client,
                    "missing",
                    "this endpoint needs credentials: " + "; ".join(_ways(self.authenticator)),
                )
            caller = found
        if self.limits is not None:
            wait = self.limits.take(_key(caller))
            if wait is not None:
                raise _too_many(wait, "requests per second")
        return caller

    async def identify(self, request: web.Request) -> Principal:
        """The caller of a request that needs none (a card): the one its credentials prove,
        else :data:`ANONYMOUS` (also for bad credentials: a card is no place to refuse)."""
        if not self.authenticator.client_auth:
            return ANONYMOUS
        try:
            return await self.authenticator.authenticate(request.headers) or ANONYMOUS
        except AuthError:
            return ANONYMOUS

    def open_stream(self, request: web.Request, caller: Principal) -> None:
        """Take one of the caller's stream slots (:meth:`close_stream` gives it back);
        :class:`Refused` (429) when it holds its most."""
        try:
            self.take_stream(caller)
        except Denied as denied:
            raise Refused(_answer(request, denied)) from None

    def take_stream(self, caller: Principal) -> None:
        """:meth:`open_stream` for any transport: :class:`Denied` (429) when the caller holds
        its most streams."""
        if self.limits is not None and not self.limits.open_stream(_key(caller)):
            raise _too_many(1.0, "open streams")

    def close_stream(self, caller: Principal) -> None:
        """Give back the stream slot :meth:`open_stream` took."""
        if self.limits is not None:
            self.limits.close_stream(_key(caller))

    def _failed(self, client: str | None, reason: str, message: str) -> Denied:
        """The refusal of credentials that failed: 401 (503 when the issuer is unreachable:
        not the client's failure), or 429 once ``client`` failed too often."""
        if reason != "unavailable" and self.failures is not None:
            wait = self.failures.failed(client)
            if wait is not None:
                return _too_many(wait, "failed authentications", "this address")
        return self._unauthorized(reason, message)

    def _unauthorized(self, reason: str, message: str) -> Denied:
        status = 503 if reason == "unavailable" else 401
        error = RpcError(UNAUTHENTICATED, message, {"reason": reason}, reason="UNAUTHENTICATED")
        headers = {"WWW-Authenticate": self.authenticator.challenge()} if status == 401 else {}
        return Denied(error, status, headers)


GATE = web.AppKey("gate", Gate)


def _ways(authenticator: Authenticator) -> list[str]:
    ways = []
    if authenticator.keys is not None:
        ways.append("an API key as 'X-API-Key: <key>' or 'Authorization: Bearer <key>'")
    if authenticator.tokens is not None:
        ways.append("a JWT from the configured issuer as 'Authorization: Bearer <token>'")
    return ways


def _key(caller: Principal) -> str:
    """The rate bucket of a caller: its tenant and subject."""
    return f"{caller.tenant or ''}\x1f{caller.subject}"


def _too_many(wait: float, what: str, who: str = "this caller") -> Denied:
    seconds = max(1, math.ceil(wait))
    error = RpcError(
        RATE_LIMITED,
        f"too many {what} from {who}; retry in {seconds} s",
        {"retryAfter": seconds, "limit": what},
        reason="RATE_LIMITED",
    )
    return Denied(error, 429, {"Retry-After": str(seconds)})


def _answer(request: web.Request, denied: Denied) -> web.Response:
    version: Version = "1.0" if request.headers.get(VERSION_HEADER, "").startswith("1") else "0.3"
    body: dict[str, Any] = error_body(version, None, denied.error)
    return web.json_response(body, status=denied.status, headers=denied.headers)
