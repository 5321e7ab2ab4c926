"""Read your writes with ``switchboard serve --workers 2``, on SQLite and PostgreSQL: each write
acknowledged by one worker is seen by the very next request to the other one, 200 times in a
row, with the poll between workers turned off (a minute) so only the acknowledgement can make
it so.

Each round, with the two workers taking turns as writer and reader (one keep-alive connection
pinned to each, :func:`tests.support.served.pinned_clients`):

- register an agent (a pushed card), then route a message that shares no word with its skill
  (by meaning: by words it would be refused) on the other worker: the new agent answers;
- send a message that makes a task, then ``GetTask``, ``CancelTask`` and a follow-up message
  naming the task on the other worker (each reaches the task's agent);
- delete the agent, then route the same message on the other worker: refused (``-32050``);
- create an API client, then call with its key on the other worker; revoke it, then call
  again: refused (``-32054``).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.pathagents import PathAgents, path_agents, path_card
from bench.scenarios.writes import FX, QUESTION
from tests.support.helpers import AUTH
from tests.support.served import ServedRouter, pinned_clients, serve_workers
from tests.support.thorough import rounds

pytestmark = pytest.mark.slow

# 200 rounds in a thorough run (.ci/run's second), 40 in the default one
ROUNDS = int(os.environ.get("SWITCHBOARD_TEST_RYW_ROUNDS") or rounds(200, 40))
OTHER = {
    "id": "leave",
    "name": "Holiday requests",
    "description": "Files requests for paid time off and shows remaining vacation days.",
    "tags": ["vacation", "hr"],
    "examples": ["I want to take next Friday off"],
}


@contextlib.asynccontextmanager
async def _workers(
    aiohttp_server: Any, database: str, model_dir: Path
) -> AsyncIterator[tuple[ServedRouter, list[httpx.AsyncClient], str, PathAgents]]:
    settings = {
        "matcher": "semantic",
        "embedding_model": str(model_dir),
        "client_auth": "api-key",
        "catalog_sync_interval": 60.0,  # no poll: only the acknowledgement makes writes seen
    }
    async with (
        path_agents() as agents,
        serve_workers(aiohttp_server, database, 2, **settings) as server,
    ):
        clients = list((await pinned_clients(server, AUTH)).values())
        try:
            made = await clients[0].post("/api/v1/clients", json={"subject": "router-user"})
            assert made.status_code == 201, made.text
            other = path_card(agents.url("hr"), "HR desk", OTHER)
            resp = await clients[0].post("/api/v1/agents", json={"card": other, "id": "hr"})
            assert resp.status_code == 201 and resp.json()["vectors"] == "ready", resp.text
            yield server, clients, made.json()["key"], agents
        finally:
            for client in clients:
                await client.aclose()


def _send(text: str, key: str | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    body = {
        "jsonrpc": "2.0",
        "id": uuid.uuid4().hex,
        "method": "SendMessage",
        "params": {
            "message": {
                "role": "ROLE_USER",
                "messageId": uuid.uuid4().hex,
                "parts": [{"text": text}],
            }
        },
    }
    headers = {"A2A-Version": "1.0"}
    if key is not None:
        headers["X-API-Key"] = key
    return body, headers


async def _call(client: httpx.AsyncClient, key: str, text: str) -> dict[str, Any]:
    body, headers = _send(text, key)
    resp = await client.post("/", json=body, headers=headers)
    return resp.json()


async def test_every_acknowledged_write_is_seen_by_the_other_worker_at_once(
    aiohttp_server: Any, db_url: str, model_dir: Path
) -> None:
    stale: list[str] = []
    async with _workers(aiohttp_server, db_url, model_dir) as (server, clients, key, agents):
        for n in range(ROUNDS):
            writer, reader = clients[n % 2], clients[(n + 1) % 2]
            name = f"fx{n}"
            card = path_card(agents.url(name), f"Money desk {n}", FX)
            resp = await writer.post("/api/v1/agents", json={"card": card, "id": name})
            assert resp.status_code == 201, resp.text
            assert resp.json()["vectors"] == "ready" and "stale_workers" not in resp.json()
            answer = await _call(reader, key, QUESTION)
            if answer.get("result", {}).get("message", {}).get("parts") != [
                {"text": f"{name}: {QUESTION}"}
            ]:
                stale.append(f"round {n}: registered, then routed: {answer}")
            answer = await _call(writer, key, f"task {QUESTION}")
            task_id = answer.get("result", {}).get("task", {}).get("id")
            assert task_id, answer
            body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
            headers = {"A2A-Version": "1.0", "X-API-Key": key}
            got = await reader.post("/", json=body, headers=headers)
            if got.json().get("result", {}).get("id") != task_id:
                stale.append(f"round {n}: sent, then GetTask: {got.json()}")
            body["method"] = "CancelTask"  # the agent's answer: the task reached it
            cancel = await reader.post("/", json=body, headers=headers)
            if cancel.json().get("error", {}).get("code") != -32002:
                stale.append(f"round {n}: sent, then CancelTask: {cancel.json()}")
            follow, headers = _send("thanks", key)  # no skill fits: only the task's owner
            follow["params"]["message"]["taskId"] = task_id
            answer = (await reader.post("/", json=follow, headers=headers)).json()
            if answer.get("result", {}).get("message", {}).get("parts") != [
                {"text": f"{name}: thanks"}
            ]:
                stale.append(f"round {n}: sent, then continued the task: {answer}")
            assert (await reader.delete(f"/api/v1/agents/{name}")).status_code == 204
            answer = await _call(writer, key, QUESTION)
            if answer.get("error", {}).get("code") != -32050:
                stale.append(f"round {n}: deleted, then routed: {answer}")
            made = await writer.post("/api/v1/clients", json={"subject": f"user-{n}"})
            assert made.status_code == 201, made.text
            fresh_key, client_id = made.json()["key"], made.json()["id"]
            answer = await _call(reader, fresh_key, "I want to take next Friday off")
            if "result" not in answer:
                stale.append(f"round {n}: client created, then called: {answer}")
            revoked = await reader.delete(f"/api/v1/clients/{client_id}")
            assert revoked.status_code in (200, 204), revoked.text
            answer = await _call(writer, fresh_key, "I want to take next Friday off")
            if answer.get("error", {}).get("code") != -32054:
                stale.append(f"round {n}: client revoked, then called: {answer}")
        await _feedback_is_learned_everywhere(clients, agents)
        pids = set()
        for client in clients:  # the connections stayed with their workers all along
            status = (await client.get("/api/v1/status")).json()
            pids.add(int(status["replica"]["name"].split(":")[-2]))
        assert pids == server.pids
    assert stale == [], f"{len(stale)} stale answers, e.g. {stale[:3]}"


async def _feedback_is_learned_everywhere(
    clients: list[httpx.AsyncClient], agents: PathAgents
) -> None:
    """Operator feedback through one worker: explain on the other chooses as it says at once."""
    card = path_card(agents.url("travel-money"), "Travel money", FX)
    resp = await clients[0].post("/api/v1/agents", json={"card": card, "id": "travel-money"})
    assert resp.status_code == 201, resp.text
    text = "sort out the cash for my trip to Osaka"
    body = {"text": text, "agent": "travel-money", "skill": "fx"}
    resp = await clients[0].post("/api/v1/route/feedback", json=body)
    assert resp.status_code in (200, 201), resp.text
    message = {"role": "ROLE_USER", "messageId": "x", "parts": [{"text": text}]}
    explain = await clients[1].post(
        "/api/v1/route/explain", json={"version": "1.0", "message": message}
    )
    choice = explain.json()["choice"]
    assert choice is not None and choice["agent_id"] == "travel-money", explain.json()
