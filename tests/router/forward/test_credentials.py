"""OutboundAuth against a real OAuth2 token endpoint (client credentials, HTTP Basic): tokens
cached and fetched again after expiry (a clock the test moves), one fetch for concurrent
callers, failures as -32052 without secrets, the SSRF guard; and Upstream with it: the
credential on every call and stream, the client's Authorization only with
forward_client_auth, a 401 answered with a fresh token once."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from registry.access.credentials import AgentCredentials, parse_credential
from registry.access.secrets import SecretBox, generate_key
from registry.crawler import Crawler
from registry.netguard import AddressPolicy
from registry.service import Registry
from registry.store import Store
from router.choose.choice import Target
from router.forward.credentials import DEFAULT_LIFETIME, OutboundAuth
from router.forward.upstream import Upstream, forward_headers
from router.protocol.errors import AGENT_UNAVAILABLE, RpcError
from tests.support.helpers import card_v1, make_settings

KEY = generate_key()
CLIENT_ID = "switchboard:router"
SECRET = "p@ss:w+rd/=s3cr3t"
LOOPBACK = AddressPolicy(["127.0.0.0/8"])
OK = {"jsonrpc": "2.0", "id": 1, "result": {"kind": "task", "id": "t-1"}}


class Clock:
    """Monotonic seconds the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TokenEndpoint:
    """A real OAuth2 token endpoint: client credentials grant, client_secret_basic."""

    def __init__(self) -> None:
        self.server: TestServer | None = None
        self.forms: list[dict[str, str]] = []
        self.issued = 0
        self.expires_in: Any = 100
        self.answer: tuple[int, Any] | None = None  # instead of a token
        self.gate: asyncio.Event | None = None  # requests wait for it
        self.arrived = asyncio.Event()

    @property
    def url(self) -> str:
        assert self.server is not None
        return str(self.server.make_url("/oauth2/token"))

    async def handle(self, request: web.Request) -> web.StreamResponse:
        form = dict(await request.post())
        self.forms.append({k: str(v) for k, v in form.items()})
        self.arrived.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.answer is not None:
            status, body = self.answer
            if isinstance(body, str):
                return web.Response(status=status, text=body)
            return web.json_response(body, status=status)
        scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
        user, _, password = base64.b64decode(encoded).decode().partition(":")
        if scheme != "Basic" or (unquote(user), unquote(password)) != (CLIENT_ID, SECRET):
            return web.json_response({"error": "invalid_client"}, status=401)
        if form.get("grant_type") != "client_credentials":
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        self.issued += 1
        body = {"access_token": f"tok-{self.issued}", "token_type": "Bearer"}
        if self.expires_in is not None:
            body["expires_in"] = self.expires_in
        return web.json_response(body)


async def moved(_request: web.Request) -> web.Response:
    raise web.HTTPFound("/oauth2/token")


@pytest.fixture
async def tokens(aiohttp_server: Any) -> AsyncIterator[TokenEndpoint]:
    endpoint = TokenEndpoint()
    app = web.Application()
    app.router.add_post("/oauth2/token", endpoint.handle)
    app.router.add_post("/moved", moved)
    endpoint.server = await aiohttp_server(app)
    yield endpoint
    if endpoint.gate is not None:
        endpoint.gate.set()


@pytest.fixture
async def registry(sqlite_url: str) -> AsyncIterator[Registry]:
    """Agents ``weather`` and ``invoices``."""
    store = Store(sqlite_url)
    registry = Registry(store, Crawler(make_settings(sqlite_url)))
    await registry.load()
    for agent_id in ("weather", "invoices"):
        await registry.register_card(card_v1(f"https://{agent_id}.example.com"), agent_id)
    try:
        yield registry
    finally:
        await store.close()


@pytest.fixture
async def credentials(registry: Registry) -> AgentCredentials:
    credentials = AgentCredentials(registry.store, SecretBox([KEY]))
    await credentials.load()
    return credentials


@pytest.fixture
async def clock() -> Clock:
    return Clock()


@pytest.fixture
async def auth(
    credentials: AgentCredentials, registry: Registry, clock: Clock
) -> AsyncIterator[OutboundAuth]:
    auth = OutboundAuth(credentials, registry=registry, policy=LOOPBACK, clock=clock)
    await auth.start()
    yield auth
    await auth.close()


async def use_oauth2(
    credentials: AgentCredentials, tokens: TokenEndpoint, agent_id: str = "weather", **extra: Any
) -> None:
    body = {
        "kind": "oauth2",
        "token_url": tokens.url,
        "client_id": CLIENT_ID,
        "client_secret": SECRET,
        "scopes": ["a2a.call", "weather.read"],
        **extra,
    }
    await credentials.put(agent_id, parse_credential(body), by="test")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def assert_unavailable(err: RpcError, *says: str) -> None:
    assert err.code == AGENT_UNAVAILABLE and err.message == "Agent weather is unavailable"
    for part in says:
        assert part in err.data["reason"], err.data["reason"]
    assert SECRET not in json.dumps(err.data) and SECRET not in err.message


# --- OutboundAuth ------------------------------------------------------------------------------


async def test_static_headers_and_no_credential(
    auth: OutboundAuth, credentials: AgentCredentials
) -> None:
    assert await auth.headers("weather") == {}
    await credentials.put(
        "weather",
        parse_credential({"kind": "header", "header": "X-API-Key", "value": SECRET}),
        by="t",
    )
    await credentials.put("invoices", parse_credential({"kind": "header", "value": "abc"}), by="t")
    assert await auth.headers("weather") == {"X-API-Key": SECRET}
    assert await auth.headers("invoices") == {"Authorization": "Bearer abc"}
    assert not auth.invalidate("weather")  # nothing to fetch again: no retry
    assert SECRET not in repr(auth)


async def test_oauth2_token_fetched_cached_and_refreshed_after_expiry(
    auth: OutboundAuth, credentials: AgentCredentials, tokens: TokenEndpoint, clock: Clock
) -> None:
    await use_oauth2(credentials, tokens, audience="https://agents.example.com")
    assert await auth.headers("weather") == {"Authorization": "Bearer tok-1"}
    assert tokens.forms == [
        {
            "grant_type": "client_credentials",
            "scope": "a2a.call weather.read",
            "audience": "https://agents.example.com",
        }
    ]
    clock.now += 89.9  # expires_in 100, margin 10 % of it (below 30 s)
    assert await auth.headers("weather") == {"Authorization": "Bearer tok-1"}
    assert auth.fetches == 1
    clock.now += 0.1
    assert await auth.headers("weather") == {"Authorization": "Bearer tok-2"}
    assert auth.fetches == 2

    tokens.expires_in = 3600  # a long lifetime: 30 s of margin
    clock.now += 100
    assert await auth.headers("weather") == {"Authorization": "Bearer tok-3"}
    clock.now += 3569.9
    assert await auth.headers("weather") == {"Authorization": "Bearer tok-3"}
    clock.now += 0.1
    assert await auth.headers("weather") == {"Authorization": "Bearer tok-4"}


@pytest.mark.parametrize(("expires_in", "lifetime"), [(None, DEFAULT_LIFETIME), ("60", 60.0)])
async def test_lifetime_without_or_with_a_string_expires_in(
    auth: OutboundAuth,
    credentials: AgentCredentials,
    tokens: TokenEndpoint,
    clock: Clock,
    expires_in: Any,
    lifetime: float,
) -> None:
    tokens.expires_in = expires_in
    await use_oauth2(credentials, tokens)
    await auth.headers("weather")
    clock.now += lifetime * 0.9 - 0.01
    assert (await auth.headers("weather"))["Authorization"] == "Bearer tok-1"
    clock.now += 0.01
    assert (await auth.headers("weather"))["Authorization"] == "Bearer tok-2"


async def test_concurrent_callers_share_one_fetch(
    auth: OutboundAuth, credentials: AgentCredentials, tokens: TokenEndpoint
) -> None:
    await use_oauth2(credentials, tokens)
    tokens.gate = asyncio.Event()
    callers = [asyncio.create_task(auth.headers("weather")) for _ in range(20)]
    await tokens.arrived.wait()  # every caller has started by the time the request is in
    tokens.gate.set()
    answers = await asyncio.gather(*callers)
    assert answers == [{"Authorization": "Bearer tok-1"}] * 20
    assert len(tokens.forms) == 1 and auth.fetches == 1


async def test_a_cancelled_caller_does_not_cancel_the_fetch(
    auth: OutboundAuth, credentials: AgentCredentials, tokens: TokenEndpoint
) -> None:
    await use_oauth2(credentials, tokens)
    tokens.gate = asyncio.Event()
    first = asyncio.create_task(auth.headers("weather"))
    second = asyncio.create_task(auth.headers("weather"))
    await tokens.arrived.wait()
    first.cancel()
    tokens.gate.set()
    assert await second == {"Authorization": "Bearer tok-1"}
    assert first.cancelled() and auth.fetches == 1


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (
            (401, {"error": "invalid_client", "error_description": "unknown client"}),
            "HTTP 401 (invalid_client: unknown client)",
        ),
        ((500, "<html>oops</html>"), "HTTP 500"),
        ((200, "not json"), "not a JSON object"),
        ((200, {"token_type": "Bearer"}), "no usable access_token"),
        ((200, {"access_token": "a b"}), "no usable access_token"),
        ((200, {"access_token": "t", "token_type": "mac"}), "'mac' is not Bearer"),
        ((200, "x" * 70_000), "exceeds 65536 bytes"),
    ],
)
async def test_token_endpoint_failures(
    auth: OutboundAuth,
    credentials: AgentCredentials,
    tokens: TokenEndpoint,
    answer: tuple[int, Any],
    says: str,
) -> None:
    await use_oauth2(credentials, tokens)
    tokens.answer = answer
    with pytest.raises(RpcError) as caught:
        await auth.headers("weather")
    assert_unavailable(caught.value, f"cannot get an access token from {tokens.url}: ", says)
    tokens.answer = None  # a failure is not cached: the next call asks again
    assert await auth.headers("weather") == {"Authorization": "Bearer tok-1"}


async def test_a_secret_echoed_by_the_endpoint_is_not_repeated(
    auth: OutboundAuth, credentials: AgentCredentials, tokens: TokenEndpoint
) -> None:
    await use_oauth2(credentials, tokens)
    tokens.answer = (400, {"error": "invalid_request", "error_description": f"bad {SECRET}"})
    with pytest.raises(RpcError) as caught:
        await auth.headers("weather")
    assert_unavailable(caught.value, "invalid_request: bad ***")


async def test_unreachable_redirected_and_refused_token_endpoints(
    credentials: AgentCredentials, registry: Registry, tokens: TokenEndpoint
) -> None:
    async with _auth(credentials, registry, LOOPBACK) as auth:
        await use_oauth2(credentials, tokens, token_url=f"http://127.0.0.1:{free_port()}/token")
        with pytest.raises(RpcError) as caught:
            await auth.headers("weather")
        assert_unavailable(caught.value, "cannot connect to 127.0.0.1")
        await use_oauth2(
            credentials, tokens, token_url=tokens.url.replace("/oauth2/token", "/moved")
        )
        with pytest.raises(RpcError) as caught:
            await auth.headers("weather")
        assert_unavailable(caught.value, "HTTP 302: redirects are not followed")
    assert tokens.forms == []  # the redirect was not followed
    async with _auth(credentials, registry, AddressPolicy()) as auth:  # loopback not allowed
        await use_oauth2(credentials, tokens)
        with pytest.raises(RpcError) as caught:
            await auth.headers("weather")
        assert_unavailable(caught.value, "127.0.0.1", "SWITCHBOARD_ALLOW_NETWORKS")
    assert tokens.forms == []  # the SSRF guard refused before any request


def _auth(credentials: AgentCredentials, registry: Registry, policy: AddressPolicy) -> Any:
    class Scope:
        async def __aenter__(self) -> OutboundAuth:
            self.auth = OutboundAuth(credentials, registry=registry, policy=policy)
            return self.auth

        async def __aexit__(self, *exc: object) -> None:
            await self.auth.close()

    return Scope()


async def test_invalidate_and_a_new_credential_fetch_a_new_token(
    auth: OutboundAuth, credentials: AgentCredentials, tokens: TokenEndpoint
) -> None:
    await use_oauth2(credentials, tokens)
    assert await auth.headers("weather") == {"Authorization": "Bearer tok-1"}
    assert auth.invalidate("weather", "Bearer tok-0")  # another token: the cached one stays
    assert await auth.headers("weather") == {"Authorization": "Bearer tok-1"}
    assert auth.invalidate("weather", "Bearer tok-1")
    assert await auth.headers("weather") == {"Authorization": "Bearer tok-2"}
    await use_oauth2(credentials, tokens, scopes=["other"])  # changed: its own token
    assert await auth.headers("weather") == {"Authorization": "Bearer tok-3"}
    assert tokens.forms[-1]["scope"] == "other"


async def test_a_secret_that_cannot_be_decrypted(
    registry: Registry, credentials: AgentCredentials, tokens: TokenEndpoint
) -> None:
    await use_oauth2(credentials, tokens)
    await credentials.put("invoices", parse_credential({"kind": "header", "value": "v"}), by="t")
    other = AgentCredentials(registry.store, SecretBox([generate_key()]))
    await other.load()
    auth = OutboundAuth(other, policy=LOOPBACK)
    for agent_id in ("weather", "invoices"):
        with pytest.raises(RpcError) as caught:
            await auth.headers(agent_id)
        assert caught.value.code == AGENT_UNAVAILABLE
        assert "SWITCHBOARD_SECRET_KEY" in caught.value.data["reason"]
    assert tokens.forms == []
    await auth.close()


async def test_forward_client_auth_adds_nothing(
    auth: OutboundAuth, credentials: AgentCredentials, tokens: TokenEndpoint
) -> None:
    await use_oauth2(credentials, tokens, forward_client_auth=True)
    assert auth.forwards_client_auth("weather") and not auth.forwards_client_auth("invoices")
    assert await auth.headers("weather") == {}
    assert not auth.invalidate("weather")
    assert tokens.forms == []


async def test_a_removed_agent_registered_again_has_no_credential(
    auth: OutboundAuth, credentials: AgentCredentials, registry: Registry
) -> None:
    await credentials.put("weather", parse_credential({"kind": "header", "value": "v"}), by="t")
    await registry.remove("weather")
    assert auth.credential("weather") is None
    await registry.register_card(card_v1("https://elsewhere.example.com"), "weather")
    assert await auth.headers("weather") == {}  # this process still holds the old one


# --- Upstream with OutboundAuth ----------------------------------------------------------------


class Agent:
    """An agent that records the headers of each call and accepts only ``accepted`` (in the
    header ``header``); anything else is a 401."""

    def __init__(self, header: str = "Authorization", accepted: str | None = None) -> None:
        self.header, self.accepted = header, accepted
        self.seen: list[dict[str, str]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(dict(request.headers))
        if self.accepted is not None and request.headers.get(self.header) != self.accepted:
            return web.json_response({"detail": "unauthorized"}, status=401)
        body = await request.json()
        if body["method"] == "SendStreamingMessage":
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(f"data: {json.dumps(OK)}\n\n".encode())
            return resp
        return web.json_response(OK)


@pytest.fixture
async def serve_agent(aiohttp_server: Any) -> Any:
    async def start(agent: Agent) -> Target:
        app = web.Application()
        app.router.add_post("/rpc", agent.handle)
        server = await aiohttp_server(app)
        return Target(agent_id="weather", url=str(server.make_url("/rpc")), version="1.0")

    return start


@pytest.fixture
async def upstream(auth: OutboundAuth) -> AsyncIterator[Upstream]:
    up = Upstream(connect_timeout=2.0, read_timeout=5.0, policy=LOOPBACK)
    up.auth = auth
    async with up:
        yield up


async def call(up: Upstream, target: Target, **client_headers: str) -> dict[str, Any]:
    headers = forward_headers(client_headers, target.version)
    return await up.call(target, "SendMessage", {}, request_id=1, headers=headers)


async def stream(up: Upstream, target: Target, **client_headers: str) -> list[dict[str, Any]]:
    headers = forward_headers(client_headers, target.version)
    events = up.stream(target, "SendStreamingMessage", {}, request_id=1, headers=headers)
    return [event async for event in events]


async def test_the_client_authorization_never_leaks_without_forward_client_auth(
    serve_agent: Any, credentials: AgentCredentials
) -> None:
    agent = Agent()
    target = await serve_agent(agent)
    async with Upstream(connect_timeout=2.0, read_timeout=5.0) as bare:  # no auth at all
        await call(bare, target, Authorization="Bearer client")
        raw = {"Authorization": "Bearer raw", "Proxy-Authorization": "Basic x"}
        await bare.call(target, "SendMessage", {}, request_id=1, headers=raw)
    assert [h.get("Authorization") for h in agent.seen] == [None, None]
    assert "Proxy-Authorization" not in agent.seen[1]


async def test_upstream_sends_the_credential_or_the_forwarded_client_authorization(
    upstream: Upstream, serve_agent: Any, credentials: AgentCredentials
) -> None:
    agent = Agent(header="X-API-Key", accepted=SECRET)
    target = await serve_agent(agent)
    await credentials.put(
        "weather",
        parse_credential({"kind": "header", "header": "X-API-Key", "value": SECRET}),
        by="t",
    )
    assert await call(upstream, target, Authorization="Bearer client") == OK
    assert await stream(upstream, target, Authorization="Bearer client") == [OK]
    for seen in agent.seen:
        assert seen["X-API-Key"] == SECRET and "Authorization" not in seen

    agent.accepted, agent.header = "Bearer client", "Authorization"
    await credentials.put("weather", parse_credential({"forward_client_auth": True}), by="t")
    assert await call(upstream, target, Authorization="Bearer client") == OK
    assert await stream(upstream, target, Authorization="Bearer client") == [OK]
    assert [s.get("Authorization") for s in agent.seen[2:]] == ["Bearer client"] * 2
    assert "X-API-Key" not in agent.seen[-1]
    agent.accepted = None
    await call(upstream, target)  # no client Authorization: nothing instead
    assert "Authorization" not in agent.seen[-1] and "X-API-Key" not in agent.seen[-1]


@pytest.mark.parametrize("send", [call, stream])
async def test_a_401_gets_a_fresh_token_once(
    upstream: Upstream,
    serve_agent: Any,
    credentials: AgentCredentials,
    tokens: TokenEndpoint,
    send: Any,
) -> None:
    agent = Agent(accepted="Bearer tok-1")
    target = await serve_agent(agent)
    await use_oauth2(credentials, tokens)
    assert await send(upstream, target) in (OK, [OK])
    agent.accepted = "Bearer tok-2"  # the agent no longer takes the first token
    assert await send(upstream, target) in (OK, [OK])
    assert [s["Authorization"] for s in agent.seen] == ["Bearer tok-1"] * 2 + ["Bearer tok-2"]
    assert len(tokens.forms) == 2

    agent.accepted = "never"  # refused again after the fresh token: asked once more only
    with pytest.raises(RpcError) as caught:
        await send(upstream, target)
    reason = caught.value.data["reason"]
    assert (
        caught.value.code == AGENT_UNAVAILABLE
        and "HTTP 401 Unauthorized: the agent refused" in reason
    )
    assert len(agent.seen) == 5 and len(tokens.forms) == 3


async def test_a_401_with_a_static_header_is_not_retried(
    upstream: Upstream, serve_agent: Any, credentials: AgentCredentials
) -> None:
    agent = Agent(header="X-API-Key", accepted="right")
    target = await serve_agent(agent)
    await credentials.put(
        "weather",
        parse_credential({"kind": "header", "header": "X-API-Key", "value": "wrong"}),
        by="t",
    )
    with pytest.raises(RpcError):
        await call(upstream, target)
    assert len(agent.seen) == 1


async def test_no_token_no_call(
    upstream: Upstream, serve_agent: Any, credentials: AgentCredentials, tokens: TokenEndpoint
) -> None:
    agent = Agent()
    target = await serve_agent(agent)
    await use_oauth2(credentials, tokens)
    tokens.answer = (401, {"error": "invalid_client"})
    for send in (call, stream):
        with pytest.raises(RpcError) as caught:
            await send(upstream, target)
        err = caught.value
        assert err.code == AGENT_UNAVAILABLE and set(err.data) == {"agent", "url", "reason"}
        assert err.data["url"] == target.url and "invalid_client" in err.data["reason"]
    assert agent.seen == []
