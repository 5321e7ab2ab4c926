"""Outbound credentials on the wire: the headers the router adds to a call to an agent.

:class:`OutboundAuth` turns an agent's stored credential
(:class:`~registry.access.credentials.Credential`) into headers: a static header as it is,
or ``Authorization: Bearer <access token>`` from OAuth2 client credentials (RFC 6749 section
4.4: ``grant_type=client_credentials`` posted as a form, the client authenticated with HTTP
Basic, the scopes in ``scope``). Tokens are cached per agent until ``expires_in`` minus a
margin (30 s, or 10 % of a shorter lifetime); one fetch per agent is in flight at a time, the
other callers await it; :meth:`OutboundAuth.invalidate` drops a token an agent refused (401).
The token endpoint is called through the same SSRF guard as agents. Failures are
``AGENT_UNAVAILABLE`` (-32052) errors that say what went wrong, never with a secret.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
from yarl import URL

from registry.access.credentials import AgentCredentials, Credential
from registry.access.secrets import SecretError
from registry.egress import OutboundProxy
from registry.errors import RegistryError
from registry.netguard import AddressPolicy, redact_url
from registry.outbound import outbound_connector, outbound_middlewares
from registry.service import Registry
from router.protocol.errors import AGENT_UNAVAILABLE, RpcError

__all__ = ["DEFAULT_LIFETIME", "MAX_TOKEN_RESPONSE", "OutboundAuth"]

log = logging.getLogger(__name__)

DEFAULT_LIFETIME = 300.0
"""Seconds a token is used when the token endpoint gives no ``expires_in``."""
MAX_TOKEN_RESPONSE = 64 * 1024
"""Bytes of a token endpoint's answer read at most."""
_MARGIN_SHARE = 0.1


@dataclass(frozen=True)
class _Token:
    """A cached access token of one agent, for the credential it was fetched with."""

    credential: Credential
    authorization: str  # "Bearer <token>"
    refresh_at: float  # on the clock of OutboundAuth


class OutboundAuth:
    """The outbound credentials of every agent, as headers for the calls to it.

    ``credentials`` holds the stored credentials; with ``registry``, a credential counts only
    for the registration of its agent the catalog shows now (an agent removed and registered
    again does not inherit it). ``policy`` is the SSRF guard for token endpoints (the agents'
    own, ``SWITCHBOARD_ALLOW_NETWORKS``). ``clock`` (monotonic seconds) and ``margin`` decide
    when a cached token is fetched again.
    """

    def __init__(
        self,
        credentials: AgentCredentials,
        *,
        registry: Registry | None = None,
        policy: AddressPolicy | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 10.0,
        margin: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        user_agent: str = "Switchboard",
        proxy: OutboundProxy | None = None,
    ) -> None:
        self.credentials = credentials
        self.registry = registry
        self.policy = policy
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.margin = margin
        self.clock = clock
        self.user_agent = user_agent
        self.proxy = proxy  # SWITCHBOARD_OUTBOUND_PROXY, for the token endpoints
        self.fetches = 0  # token requests made (for operators and tests)
        self._session: aiohttp.ClientSession | None = None
        self._tokens: dict[str, _Token] = {}
        self._flights: dict[str, tuple[Credential, asyncio.Task[_Token]]] = {}

    def __repr__(self) -> str:
        return f"OutboundAuth(<{len(self._tokens)} cached token(s)>)"

    async def start(self) -> None:
        """Open the session for token endpoints (idempotent; done on first use otherwise)."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=outbound_connector(self.policy, self.proxy, limit=100),
                middlewares=outbound_middlewares(self.proxy, self.policy),
                timeout=aiohttp.ClientTimeout(
                    total=self.connect_timeout + 2 * self.read_timeout,
                    sock_connect=self.connect_timeout,
                    sock_read=self.read_timeout,
                ),
                trust_env=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                headers={"User-Agent": self.user_agent},
            )

    async def close(self) -> None:
        """Stop the fetches in flight, close the session and forget every token."""
        for _, task in self._flights.values():
            task.cancel()
        self._flights.clear()
        self._tokens.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None

    def credential(self, agent_id: str) -> Credential | None:
        """The agent's credential, if it has one (for its current registration)."""
        created_at = None
        if self.registry is not None:
            record = self.registry.catalog.snapshot.agents.get(agent_id)
            if record is None:
                return None
            created_at = record.created_at
        return self.credentials.get(agent_id, agent_created_at=created_at)

    def forwards_client_auth(self, agent_id: str) -> bool:
        """Whether the client's own ``Authorization`` goes to this agent (and no other
        credential)."""
        credential = self.credential(agent_id)
        return credential is not None and credential.forward_client_auth

    async def headers(self, agent_id: str) -> dict[str, str]:
        """The headers to add to a call to ``agent_id``: its static header, or
        ``Authorization: Bearer <token>`` (cached, or fetched now); none without a
        credential or with ``forward_client_auth``. RpcError -32052 when the secret cannot be
        decrypted or no token can be had."""
        credential = self.credential(agent_id)
        if credential is None or credential.forward_client_auth or credential.kind == "forward":
            return {}
        if credential.kind == "header":
            try:
                name, value = credential.header()
            except SecretError as exc:
                raise _unavailable(agent_id, f"its outbound credential: {exc.message}") from None
            return {name: value}
        token = await self._token(credential)
        return {"Authorization": token.authorization}

    def invalidate(self, agent_id: str, authorization: str | None = None) -> bool:
        """Drop the agent's cached access token (only if it is ``authorization``, the header
        value a refused call carried, when given). True if the agent uses OAuth2 tokens, so
        that a call again gets a fresh one."""
        cached = self._tokens.get(agent_id)
        if cached is not None and authorization in (None, cached.authorization):
            del self._tokens[agent_id]
        credential = self.credential(agent_id)
        return (
            credential is not None
            and credential.kind == "oauth2"
            and not credential.forward_client_auth
        )

    # -- tokens ----------------------------------------------------------------------------------

    async def _token(self, credential: Credential) -> _Token:
        agent_id = credential.agent_id
        cached = self._tokens.get(agent_id)
        fresh = cached is not None and self.clock() < cached.refresh_at
        if cached is not None and fresh and cached.credential == credential:
            return cached
        flight = self._flights.get(agent_id)
        if flight is None or flight[0] != credential:
            task = asyncio.get_running_loop().create_task(self._fetch(credential))
            flight = self._flights[agent_id] = (credential, task)
            task.add_done_callback(lambda done: self._landed(agent_id, done))
        return await asyncio.shield(flight[1])

    def _landed(self, agent_id: str, task: asyncio.Task[_Token]) -> None:
        flight = self._flights.get(agent_id)
        if flight is not None and flight[1] is task:
            del self._flights[agent_id]
        if not task.cancelled():
            task.exception()  # retrieved: a failure nobody awaits any more is not logged twice

    async def _fetch(self, credential: Credential) -> _Token:
        """POST the client credentials grant; the token, cached."""
        agent_id = credential.agent_id
        where = redact_url(credential.token_url or "")
        try:
            secret = credential.usable_secret()
        except SecretError as exc:
            raise _unavailable(agent_id, f"its outbound credential: {exc.message}") from None
        try:
            answer = await self._post(credential, secret)
        except _TokenFailure as exc:
            reason = f"cannot get an access token from {where}: {_scrub(str(exc), secret)}"
            log.warning("agent %s: %s", agent_id, reason)
            raise _unavailable(agent_id, reason) from None
        lifetime = answer["lifetime"]
        token = _Token(
            credential,
            f"Bearer {answer['access_token']}",
            self.clock() + lifetime - min(self.margin, lifetime * _MARGIN_SHARE),
        )
        self._tokens[agent_id] = token
        return token

    async def _post(self, credential: Credential, secret: str) -> dict[str, Any]:
        if self._session is None or self._session.closed:
            await self.start()
        assert self._session is not None
        form = {"grant_type": "client_credentials"}
        if credential.scopes:
            form["scope"] = " ".join(credential.scopes)
        if credential.audience:
            form["audience"] = credential.audience
        basic = f"{quote(credential.client_id or '', safe='')}:{quote(secret, safe='')}"
        headers = {
            "Authorization": "Basic " + base64.b64encode(basic.encode()).decode("ascii"),
            "Accept": "application/json",
        }
        self.fetches += 1
        try:
            url = self._check(credential.token_url or "")
            async with self._session.post(
                url, data=form, headers=headers, allow_redirects=False
            ) as resp:
                if 300 <= resp.status < 400:
                    raise _TokenFailure(f"HTTP {resp.status}: redirects are not followed")
                body = await resp.content.read(MAX_TOKEN_RESPONSE + 1)
                if len(body) > MAX_TOKEN_RESPONSE:
                    raise _TokenFailure(f"the answer exceeds {MAX_TOKEN_RESPONSE} bytes")
                return _token_answer(resp.status, body)
        except RegistryError as exc:
            raise _TokenFailure(exc.message) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise _TokenFailure(_wire_reason(exc)) from None

    def _check(self, url: str) -> URL:
        if self.policy is not None:
            return self.policy.check_url(url)
        return URL(url)


class _TokenFailure(Exception):
    """Why no token came (one line, no secret)."""


def _token_answer(status: int, body: bytes) -> dict[str, Any]:
    """The access token and its lifetime from a token endpoint's answer."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        data = None
    if status != 200:
        detail = ""
        if isinstance(data, dict) and isinstance(data.get("error"), str):
            detail = f" ({data['error'][:64]}"
            description = data.get("error_description")
            if isinstance(description, str) and description.isprintable():
                detail += f": {description[:200]}"
            detail += ")"
        raise _TokenFailure(f"HTTP {status}{detail}")
    if not isinstance(data, dict):
        raise _TokenFailure("the answer is not a JSON object")
    token = data.get("access_token")
    if not isinstance(token, str) or not token or not token.isprintable() or " " in token:
        raise _TokenFailure("the answer has no usable access_token")
    token_type = data.get("token_type", "Bearer")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise _TokenFailure(f"token_type {str(token_type)[:32]!r} is not Bearer")
    expires_in = data.get("expires_in")
    lifetime = DEFAULT_LIFETIME
    if isinstance(expires_in, str) and expires_in.isdigit():
        expires_in = int(expires_in)
    if isinstance(expires_in, int | float) and not isinstance(expires_in, bool) and expires_in > 0:
        lifetime = float(expires_in)
    return {"access_token": token, "lifetime": lifetime}


def _wire_reason(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect to {exc.host}:{exc.port}"
    if isinstance(exc, aiohttp.ServerTimeoutError | TimeoutError):
        return "the token endpoint did not answer in time"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the token endpoint closed the connection"
    return f"the connection failed ({type(exc).__name__})"


def _scrub(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret else text


def _unavailable(agent_id: str, reason: str) -> RpcError:
    return RpcError(
        AGENT_UNAVAILABLE, f"Agent {agent_id} is unavailable", {"agent": agent_id, "reason": reason}
    )
