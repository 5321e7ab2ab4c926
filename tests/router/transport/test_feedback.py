"""router.transport.feedback: an operator's correction becomes a learned example that changes the
next decision; examples are listed and deleted per skill; bad bodies get clear 4xx answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp.test_utils import TestClient

from registry.appkeys import REGISTRY
from router.app import create_app
from tests.support.helpers import AUTH, card_v1, make_settings
from tests.support.sdk_clients import ask, connect, send
from tests.support.sdk_peers import TaskEchoExecutor, serve_sdk_agent

EXPENSES = {
    "id": "submit-expense",
    "name": "Expense reports",
    "description": "Submit receipts and get travel costs reimbursed.",
    "tags": ["expenses", "reimbursement"],
}
CARDS = {
    "id": "card-services",
    "name": "Corporate card services",
    "description": "Lost or stolen company credit cards, limits and statements.",
    "tags": ["credit card", "corporate card"],
}
TEXT = "the restaurant charged me twice on the company visa last night"


@pytest.fixture
async def client(aiohttp_client: Any, sqlite_url: str, model_dir: Path) -> TestClient:
    settings = make_settings(sqlite_url, matcher="semantic", embedding_model=str(model_dir))
    client = await aiohttp_client(create_app(settings))
    for agent_id, skill in (("expenses", EXPENSES), ("cards", CARDS)):
        card = card_v1(f"https://{agent_id}.example.com", name=agent_id.title(), skills=[skill])
        resp = await client.post(
            "/api/v1/agents", json={"card": card, "id": agent_id}, headers=AUTH
        )
        assert resp.status == 201, await resp.text()
    await client.server.app[REGISTRY].indexed()  # the skill texts are embedded behind
    return client


async def _routed_to(client: TestClient, text: str) -> str | None:
    message = {"role": "ROLE_USER", "messageId": "x", "parts": [{"text": text}]}
    resp = await client.post("/api/v1/route/explain", json={"version": "1.0", "message": message})
    choice = (await resp.json())["choice"]
    return choice["agent_id"] if choice else None


async def test_feedback_changes_the_next_decision(client: TestClient) -> None:
    before = await _routed_to(client, TEXT)
    right = "expenses" if before == "cards" else "cards"
    resp = await client.post(
        "/api/v1/route/feedback", json={"text": TEXT, "agent": right}, headers=AUTH
    )
    assert resp.status == 201, await resp.text()
    body = await resp.json()
    assert body["learned"] is True
    assert body["example"]["agent_id"] == right and body["example"]["text"] == TEXT
    assert body["before"]["agent"] == before and body["after"]["agent"] == right
    assert await _routed_to(client, TEXT) == right
    # the same kind of message, not the same words, goes right too
    assert await _routed_to(client, "the restaurant charged me twice on the company visa") == right


async def test_examples_are_listed_and_deleted(client: TestClient) -> None:
    path = "/api/v1/skills/expenses/submit-expense/examples"
    for text in ("taxi home from the airport, receipt attached", "hotel bill from Lyon"):
        resp = await client.post(
            "/api/v1/route/feedback",
            json={"message": {"role": "user", "messageId": "m", "parts": [
                {"kind": "text", "text": text}]}, "agent": "expenses", "skill": "submit-expense"},
            headers=AUTH,
        )  # fmt: skip
        assert resp.status == 201, await resp.text()
    listing = await (await client.get(path)).json()
    assert [e["text"] for e in listing["examples"]] == [
        "taxi home from the airport, receipt attached",
        "hotel bill from Lyon",
    ]
    assert listing["card_examples"] == []
    first = listing["examples"][0]["id"]
    assert (await client.delete(f"{path}/{first}", headers=AUTH)).status == 204
    assert (await client.delete(f"{path}/{first}", headers=AUTH)).status == 404
    assert len((await (await client.get(path)).json())["examples"]) == 1
    assert (await client.delete(path, headers=AUTH)).status == 204
    assert (await (await client.get(path)).json())["examples"] == []


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"agent": "cards"}, 400, "invalid_body"),
        ({"text": "x", "message": {}, "agent": "cards"}, 400, "invalid_body"),
        ({"text": "lost my card"}, 400, "invalid_body"),
        ({"text": "   ", "agent": "cards"}, 400, "invalid_body"),
        ({"text": "lost my card", "agent": "nobody"}, 404, "not_found"),
        ({"text": "lost my card", "agent": "cards", "skill": "nope"}, 404, "not_found"),
        ({"task_id": "t-unknown", "agent": "cards"}, 404, "not_found"),
        ({"message": {"parts": "x"}, "agent": "cards"}, 400, "invalid_body"),
    ],
)
async def test_bad_feedback_is_refused_clearly(
    client: TestClient, body: dict[str, Any], status: int, code: str
) -> None:
    resp = await client.post("/api/v1/route/feedback", json=body, headers=AUTH)
    assert resp.status == status, await resp.text()
    assert (await resp.json())["error"]["code"] == code


async def test_feedback_needs_the_admin_token(client: TestClient) -> None:
    resp = await client.post("/api/v1/route/feedback", json={"text": "x", "agent": "cards"})
    assert resp.status in (401, 403)
    assert "error" in await resp.json()


async def test_feedback_by_task_reads_the_first_message_from_its_agent(
    aiohttp_client: Any, sqlite_url: str, model_dir: Path
) -> None:
    settings = make_settings(sqlite_url, matcher="semantic", embedding_model=str(model_dir))
    client = await aiohttp_client(create_app(settings))
    async with serve_sdk_agent(executor=TaskEchoExecutor()) as url, httpx.AsyncClient() as http:
        resp = await client.post("/api/v1/agents", json={"url": url, "id": "echo"}, headers=AUTH)
        assert resp.status == 201
        sdk = await connect(http, str(client.make_url("/agents/echo")))  # pinned: no matching
        task = await send(sdk, ask("please repeat after me: tomato"))
        resp = await client.post(
            "/api/v1/route/feedback",
            json={"task_id": task.id, "agent": "echo", "skill": "sdk-echo"},
            headers=AUTH,
        )
        assert resp.status == 201, await resp.text()
        example = (await resp.json())["example"]
        assert example["text"] == "please repeat after me: tomato"
        assert example["task_id"] == task.id
