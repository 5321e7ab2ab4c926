"""router.choose.chooser: the message's embedding, the matcher's decision, and the LLM adjudicator
of uncertain decisions (picks, says none, times out, answers garbage), against a real HTTP
server speaking the chat-completions wire format."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from registry.appkeys import REGISTRY
from router.app import create_app
from router.transport.routes import ROUTER
from tests.support.helpers import AUTH, card_v1, make_settings

FLIGHTS = {
    "id": "book-flights",
    "name": "Flight booking",
    "description": "Books and changes airline tickets for business trips.",
    "tags": ["travel", "airline"],
}
HOTELS = {
    "id": "book-hotels",
    "name": "Hotel booking",
    "description": "Reserves hotel rooms for business trips.",
    "tags": ["travel", "lodging"],
}
MESSAGE = {
    "role": "ROLE_USER",
    "messageId": "x",
    "parts": [{"text": "I need to get to Madrid for the conference next week"}],
}


async def _router(
    aiohttp_client: Any, sqlite_url: str, model_dir: Path, chat_url: str, **cal: Any
) -> TestClient:
    settings = make_settings(
        sqlite_url,
        matcher="semantic",
        embedding_model=str(model_dir),
        router_llm_url=chat_url,
        router_llm_model="judge",
        router_llm_api_key="sk-secret",
        router_llm_timeout=0.5,
    )
    client = await aiohttp_client(create_app(settings))
    for agent_id, skill in (("flights", FLIGHTS), ("hotels", HOTELS)):
        card = card_v1(f"https://{agent_id}.example.com", name=agent_id.title(), skills=[skill])
        resp = await client.post(
            "/api/v1/agents", json={"card": card, "id": agent_id}, headers=AUTH
        )
        assert resp.status == 201, await resp.text()
    await client.server.app[REGISTRY].indexed()  # the skill texts are embedded behind
    semantic = client.server.app[ROUTER].matcher.semantic
    semantic.calibration = replace(semantic.calibration, **cal)
    return client


async def _explain(client: TestClient) -> dict[str, Any]:
    resp = await client.post("/api/v1/route/explain", json={"version": "1.0", "message": MESSAGE})
    assert resp.status == 200
    return await resp.json()


# a margin no decision reaches: every decision with a runner-up is uncertain
SMALL_MARGIN = {"margin": 2.0, "floor": -1.0, "llm_band": 0.0}
# a band that covers every score: every decision is near the floor, none refused for it
NEAR_FLOOR = {"margin": 0.0, "floor": -1.0, "llm_band": 10.0}


async def test_the_adjudicator_picks_among_the_best(
    aiohttp_client: Any, sqlite_url: str, model_dir: Path, chat: Any
) -> None:
    server, http = chat
    client = await _router(
        aiohttp_client, sqlite_url, model_dir, str(http.make_url("/v1")), **SMALL_MARGIN
    )
    server.content = '{"choice": 2, "reason": "a hotel, not a flight"}'
    out = await _explain(client)
    assert out["uncertain"] == "small margin"
    assert out["adjudicator"]["outcome"] == "picked"
    second = out["adjudicator"]["pick"]
    assert out["choice"]["tier"] == "llm" and out["choice"]["agent_id"] == second["agent"]
    [request] = server.requests
    assert request["model"] == "judge" and request["temperature"] == 0
    prompt = json.dumps(request["messages"])
    assert "Madrid" in prompt and "Flight booking" in prompt and "Hotel booking" in prompt
    assert "sk-secret" not in json.dumps(out)


async def test_the_adjudicator_says_none_fits(
    aiohttp_client: Any, sqlite_url: str, model_dir: Path, chat: Any
) -> None:
    server, http = chat
    client = await _router(
        aiohttp_client, sqlite_url, model_dir, str(http.make_url("/v1")), **NEAR_FLOOR
    )
    server.content = '{"choice": "none", "reason": "not travel"}'
    out = await _explain(client)
    assert out["adjudicator"]["outcome"] == "none"
    assert out["choice"] is None
    assert out["error"]["code"] == -32050 and out["error"]["data"]["tier"] == "llm"


@pytest.mark.parametrize("content", ["I think the first one", '{"choice": 7}', '{"choice": "x"}'])
async def test_an_answer_that_is_no_candidate_keeps_the_embedding_decision(
    aiohttp_client: Any, sqlite_url: str, model_dir: Path, chat: Any, content: str
) -> None:
    server, http = chat
    client = await _router(
        aiohttp_client, sqlite_url, model_dir, str(http.make_url("/v1")), **NEAR_FLOOR
    )
    server.content = content
    out = await _explain(client)
    assert out["adjudicator"]["outcome"] == "invalid"
    assert out["choice"]["tier"] == "semantic"
    assert out["choice"]["agent_id"] == out["candidates"][0]["agent_id"]  # the best score


async def test_a_slow_adjudicator_times_out_and_the_refusal_stands(
    aiohttp_client: Any, sqlite_url: str, model_dir: Path, chat: Any
) -> None:
    server, http = chat
    client = await _router(
        aiohttp_client, sqlite_url, model_dir, str(http.make_url("/v1")), **SMALL_MARGIN
    )
    server.stall = True
    out = await _explain(client)
    assert out["adjudicator"]["outcome"] == "timeout"
    assert out["error"]["code"] == -32050 and out["error"]["data"]["reason"] == "ambiguous"


async def test_a_confident_decision_asks_no_one(
    aiohttp_client: Any, sqlite_url: str, model_dir: Path, chat: Any
) -> None:
    server, http = chat
    client = await _router(
        aiohttp_client, sqlite_url, model_dir, str(http.make_url("/v1")),
        margin=0.0, floor=-1.0, llm_band=0.0,
    )  # fmt: skip
    out = await _explain(client)
    assert "adjudicator" not in out and out["uncertain"] is None
    assert out["choice"]["agent_id"] == out["candidates"][0]["agent_id"]
    assert server.requests == []


async def test_pinned_and_task_calls_never_reach_the_matchers_scoring(
    aiohttp_client: Any, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19: the skill matcher runs for a message the router must place, and only then:
    a pinned call (``/agents/{id}``) and a message continuing a task go to their agent
    without a decision (a real SDK agent, the whole app)."""
    from router.choose.matcher import Matcher
    from tests.router.observe.conftest import recording_agent, register

    decided: list[str] = []
    decide = Matcher.decide

    def counting(self: Matcher, *args: Any, **kwargs: Any) -> Any:
        decided.append("decide")
        return decide(self, *args, **kwargs)

    monkeypatch.setattr(Matcher, "decide", counting)
    message = {"kind": "message", "role": "user", "messageId": "m-1"}
    message["parts"] = [{"kind": "text", "text": "say hello back"}]  # type: ignore[assignment]
    send = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    async with recording_agent() as agent:
        client = await aiohttp_client(create_app(make_settings(sqlite_url)))
        await register(client, agent.url, "echo")
        first = await (await client.post("/", json=send)).json()
        assert decided == ["decide"], first  # the routed call is decided
        task = first["result"]
        pinned = await (await client.post("/agents/echo", json=send)).json()
        assert pinned["result"]["kind"] == "task", pinned
        follow = {**message, "messageId": "m-2", "taskId": task["id"]}
        follow["contextId"] = task["contextId"]
        more = await (await client.post("/", json={**send, "params": {"message": follow}})).json()
        # the echo agent's task is completed: its owner says so (it was reached, not chosen)
        assert "result" in more or "terminal state" in more["error"]["message"], more
        got = await client.post(
            "/", json={**send, "method": "tasks/get", "params": {"id": task["id"]}}
        )
        assert (await got.json())["result"]["id"] == task["id"]
    assert decided == ["decide"]
