"""The Gate in front of the A2A endpoints: 401 for callers without credentials, 429 over a
caller's rate or streams, each with its JSON-RPC error."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient, make_mocked_request

from registry.access.principal import Principal
from router.app import create_app
from router.transport.gate import GATE, Refused
from tests.support.helpers import make_settings

ADMIN = {"Authorization": "Bearer admin-secret"}
LIST = {"jsonrpc": "2.0", "id": 7, "method": "ListTasks", "params": {}}


async def _client(aiohttp_client: Any, sqlite_url: str, **settings: Any) -> TestClient:
    app = create_app(
        make_settings(sqlite_url, client_auth="api-key", admin_token="admin-secret", **settings)
    )
    return await aiohttp_client(app)


async def _key(client: TestClient, subject: str) -> str:
    made = await client.post("/api/v1/clients", json={"subject": subject}, headers=ADMIN)
    assert made.status == 201, await made.text()
    return (await made.json())["key"]


@pytest.mark.parametrize(("version", "shape"), [("1.0", "1.0"), (None, "0.3")])
async def test_no_credentials_is_401_with_a_json_rpc_error(
    aiohttp_client: Any, sqlite_url: str, version: str | None, shape: str
) -> None:
    client = await _client(aiohttp_client, sqlite_url)
    headers = {"A2A-Version": version} if version else {}
    answer = await client.post("/", json=LIST, headers=headers)
    assert answer.status == 401
    assert answer.headers["WWW-Authenticate"].startswith('Bearer realm="switchboard"')
    error = (await answer.json())["error"]
    assert error["code"] == -32054 and "X-API-Key" in error["message"]
    if shape == "1.0":  # the 1.0 shape: details in ErrorInfo metadata
        assert error["data"][0]["reason"] == "UNAUTHENTICATED"
    # the cards stay public
    assert (await client.get("/.well-known/agent-card.json")).status == 200


async def test_a_caller_over_its_rate_gets_429_and_others_do_not(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await _client(aiohttp_client, sqlite_url, rate_limit_rps=0.01, rate_limit_burst=1)
    alice, bob = await _key(client, "alice"), await _key(client, "bob")
    v1 = {"A2A-Version": "1.0"}
    assert (await client.post("/", json=LIST, headers={**v1, "X-API-Key": alice})).status == 200
    over = await client.post("/", json=LIST, headers={**v1, "X-API-Key": alice})
    assert over.status == 429 and int(over.headers["Retry-After"]) >= 1
    error = (await over.json())["error"]
    assert error["code"] == -32055
    assert (await client.post("/", json=LIST, headers={**v1, "X-API-Key": bob})).status == 200


async def test_stream_slots_are_per_caller(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await _client(aiohttp_client, sqlite_url, rate_limit_streams=1)
    gate = client.app[GATE]
    request = make_mocked_request("POST", "/", headers={"A2A-Version": "1.0"})
    alice, bob = Principal("alice", method="api-key"), Principal("bob", method="api-key")
    gate.open_stream(request, alice)
    with pytest.raises(Refused) as refused:
        gate.open_stream(request, alice)
    assert refused.value.response.status == 429
    gate.open_stream(request, bob)
    gate.close_stream(alice)
    gate.open_stream(request, alice)  # the slot was given back


UNKNOWN = "sbk_0123456789ab_" + "A" * 43


async def test_failed_authentications_are_throttled_per_address_never_valid_credentials(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    """Beyond SWITCHBOARD_RATE_LIMIT_AUTH_FAILURES a failing request gets 429 (one budget per
    client address for the A2A endpoints and the admin API); valid credentials from that
    address pass; the address is X-Forwarded-For's only from a trusted proxy."""
    client = await _client(
        aiohttp_client, sqlite_url, rate_limit_auth_failures=0.01, trusted_proxies=["127.0.0.1"]
    )  # a bucket of one failure, refilled in 100 s
    alice = await _key(client, "alice")
    one = {"A2A-Version": "1.0", "X-Forwarded-For": "203.0.113.9"}
    assert (await client.post("/", json=LIST, headers={**one, "X-API-Key": UNKNOWN})).status == 401
    over = await client.post("/", json=LIST, headers=one)  # no credentials: a failure too
    assert over.status == 429 and over.headers["Retry-After"] == "100"
    error = (await over.json())["error"]
    assert error["code"] == -32055 and "failed authentications" in error["message"]
    assert error["data"][0]["metadata"]["limit"] == "failed authentications"
    assert (await client.post("/", json=LIST, headers={**one, "X-API-Key": alice})).status == 200
    admin = await client.get("/api/v1/agents", headers={**one, "Authorization": "Bearer nope"})
    assert admin.status == 429 and admin.headers["Retry-After"] == "100"
    assert (await admin.json())["error"]["code"] == "rate_limited"
    assert (await client.get("/api/v1/agents", headers={**one, **ADMIN})).status == 200
    other = {"A2A-Version": "1.0", "X-Forwarded-For": "203.0.113.10"}  # another client
    assert (await client.post("/", json=LIST, headers=other)).status == 401


async def test_x_forwarded_for_from_an_untrusted_peer_is_not_believed(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await _client(aiohttp_client, sqlite_url, rate_limit_auth_failures=0.01)
    first = {"A2A-Version": "1.0", "X-Forwarded-For": "203.0.113.9"}
    assert (await client.post("/", json=LIST, headers=first)).status == 401
    second = {"A2A-Version": "1.0", "X-Forwarded-For": "203.0.113.10"}  # the same peer
    assert (await client.post("/", json=LIST, headers=second)).status == 429


async def test_the_throttle_can_be_turned_off(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await _client(aiohttp_client, sqlite_url, rate_limit_auth_failures=0)
    statuses = {(await client.post("/", json=LIST)).status for _ in range(30)}
    assert statuses == {401}
