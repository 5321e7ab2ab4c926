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
