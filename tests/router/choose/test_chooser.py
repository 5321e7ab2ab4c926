"""router.choose.chooser: the message's embedding, the matcher's decision, and the LLM adjudicator
of uncertain decisions (picks, says none, times out, answers garbage), against a real HTTP
server speaking the chat-completions wire format; explain and the send run the same route
(over the whole evaluation set)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bench.routing_eval.dataset import Message as EvalMessage
from bench.routing_eval.dataset import cards as eval_cards
from bench.routing_eval.dataset import messages as eval_messages
from registry.appkeys import REGISTRY
from router.app import create_app
from router.transport.routes import ROUTER
from tests.support.helpers import AUTH, card_v1, make_settings
from tests.support.thorough import sample

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


# --- explain predicts the send ----------------------------------------------------------------


def _agent_answer(name: str, rpc: dict[str, Any]) -> dict[str, Any]:
    """What one of :func:`_eval_agents`' agents answers: a message saying its name, in the
    call's version."""
    if rpc.get("method", "").startswith("message/"):
        message: dict[str, Any] = {"kind": "message", "role": "agent", "messageId": "r"}
        message["parts"] = [{"kind": "text", "text": name}]
        return message
    return {"message": {"role": "ROLE_AGENT", "messageId": "r", "parts": [{"text": name}]}}


@contextlib.asynccontextmanager
async def _eval_agents() -> AsyncIterator[tuple[TestServer, dict[str, str]]]:
    """Every agent of the evaluation set on one real server (agent ``name`` at
    ``/a/<name>``, JSON-RPC 0.3 and 1.0, unary and SSE), and which agent got each message
    (by ``messageId``)."""
    reached: dict[str, str] = {}

    async def rpc(request: web.Request) -> web.StreamResponse:
        name, body = request.match_info["name"], await request.json()
        reached[body["params"]["message"]["messageId"]] = name
        answer = {"jsonrpc": "2.0", "id": body.get("id"), "result": _agent_answer(name, body)}
        if body["method"] not in ("message/stream", "SendStreamingMessage"):
            return web.json_response(answer)
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        await stream.write(f"data: {json.dumps(answer)}\r\n\r\n".encode())
        await stream.write_eof()
        return stream

    app = web.Application()
    app.router.add_post("/a/{name}", rpc)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield server, reached
    finally:
        await server.close()


def _pointing_at(card: dict[str, Any], url: str) -> dict[str, Any]:
    """An evaluation card (0.3 or 1.0 shape) with every interface URL at ``url``."""
    card = json.loads(json.dumps(card))
    if "url" in card:
        card["url"] = url
    for key in ("supportedInterfaces", "additionalInterfaces"):
        for interface in card.get(key) or []:
            interface["url"] = url
    return card


async def test_explain_names_the_agent_the_send_reaches(
    aiohttp_client: Any, sqlite_url: str, model_dir: Path, chat: Any
) -> None:
    """Over the messages of the evaluation set (bench/routing_eval: a third of them, every one
    in a thorough run), for the unary and the streaming method of A2A 1.0 (and half of those,
    a third in a thorough run, for the methods of 0.3): explain's choice is
    the agent the send reaches, and its refusal the send's error. The LLM adjudicator is a
    deterministic fake (it always picks the second candidate, so a decision it settles
    differs from the embedding's)."""
    server, http = chat
    server.content = '{"choice": 2, "reason": "the second"}'
    settings = make_settings(
        sqlite_url, matcher="semantic", embedding_model=str(model_dir),
        router_llm_url=str(http.make_url("/v1")), router_llm_model="judge",
    )  # fmt: skip
    every = sample(eval_messages(), 3)  # a third; every message in a thorough run
    async with _eval_agents() as (agents, reached):
        client = await aiohttp_client(create_app(settings))
        for agent_id, card in eval_cards().items():
            card = _pointing_at(card, str(agents.make_url(f"/a/{agent_id}")))
            body = {"card": card, "id": agent_id}
            resp = await client.post("/api/v1/agents", json=body, headers=AUTH)
            assert resp.status == 201, await resp.text()
        await client.server.app[REGISTRY].indexed()
        limit = asyncio.Semaphore(8)

        async def both(m: EvalMessage, method: str) -> tuple[Any, Any]:
            version = "1.0" if method[0].isupper() else "0.3"
            params = _in_version(m.params(), version, f"{m.id}-{method}")
            async with limit:
                resp = await client.post("/api/v1/route/explain", json={"method": method, **params})
                explained = await resp.json()
                assert resp.status == 200, explained
                assert (explained["method"], explained["version"]) == (method, version)
                rpc = {"jsonrpc": "2.0", "id": m.id, "method": method, "params": params}
                headers = {"A2A-Version": version} if version == "1.0" else {}
                answer = await _first_answer(await client.post("/", json=rpc, headers=headers))
            predicted = explained["choice"]["agent_id"] if explained["choice"] else None
            code = explained["error"]["code"] if explained["error"] else None
            got = reached.get(params["message"]["messageId"])
            return (predicted, code), (got, answer.get("error", {}).get("code"))

        refused: set[str] = set()
        for method, messages in (
            ("SendMessage", every),
            ("SendStreamingMessage", every),
            ("message/send", every[::2] if len(every) < 200 else every[::3]),  # the other
            ("message/stream", every[1::2] if len(every) < 200 else every[1::3]),  # version
        ):
            pairs = await asyncio.gather(*(both(m, method) for m in messages))
            differ = [(m.id, p, s) for m, (p, s) in zip(messages, pairs, strict=True) if p != s]
            assert differ == [], method
            assert len({p[0] for p, _ in pairs}) > 25, method  # routed to many agents
            if any(p[1] == -32050 for p, _ in pairs):
                refused.add("1.0" if method[0].isupper() else "0.3")
    assert refused == {"1.0", "0.3"}  # and refused some in each version
    assert server.requests  # the adjudicator was asked


def _in_version(params: dict[str, Any], version: str, message_id: str) -> dict[str, Any]:
    """An evaluation message's 1.0 ``SendMessage`` params in ``version``'s shape."""
    message = dict(params["message"], messageId=message_id)
    if version == "0.3":
        parts: list[dict[str, Any]] = []
        for part in message["parts"]:
            if "text" in part:
                parts.append({"kind": "text", "text": part["text"]})
            else:
                file = {"uri": part["url"], "mimeType": part["mediaType"], "name": part["filename"]}
                parts.append({"kind": "file", "file": file})
        message.update(role="user", kind="message", parts=parts)
    return {**params, "message": message}


async def _first_answer(resp: Any) -> dict[str, Any]:
    """The JSON-RPC answer of a send, or the first event of a stream."""
    if resp.headers.get("Content-Type", "").startswith("text/event-stream"):
        text = await resp.text()
        data = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
        return json.loads(data)
    return await resp.json()


# --- the operating point (SWITCHBOARD_REFUSE, SWITCHBOARD_MATCH_THRESHOLD) ---------------------


async def _travel(aiohttp_client: Any, sqlite_url: str, model_dir: Path, **values: Any) -> Any:
    """Flights and hotels, matched by meaning, every score below the calibrated threshold
    (0.9) and the strict one (0.95)."""
    settings = make_settings(
        sqlite_url, matcher="semantic", embedding_model=str(model_dir), **values
    )
    client = await aiohttp_client(create_app(settings))
    for agent_id, skill in (("flights", FLIGHTS), ("hotels", HOTELS)):
        card = card_v1(f"https://{agent_id}.example.com", name=agent_id.title(), skills=[skill])
        body = {"card": card, "id": agent_id}
        assert (await client.post("/api/v1/agents", json=body, headers=AUTH)).status == 201
    await client.server.app[REGISTRY].indexed()
    semantic = client.server.app[ROUTER].matcher.semantic
    semantic.calibration = replace(
        semantic.calibration, floor=0.9, margin=0.0, strict_floor=0.95, llm_band=0.0
    )
    return client


@pytest.mark.parametrize(
    ("settings", "threshold", "source"),
    [
        ({}, 0.9, "calibrated"),
        ({"refuse": "strict"}, 0.95, "calibrated"),
        ({"match_threshold": 0.97}, 0.97, "operator"),
        ({"refuse": "strict", "match_threshold": 0.97}, 0.97, "operator"),
    ],
)
async def test_the_threshold_in_force_refuses_and_says_where_it_comes_from(
    aiohttp_client: Any, sqlite_url: str, model_dir: Path, settings: dict[str, Any],
    threshold: float, source: str,
) -> None:  # fmt: skip
    client = await _travel(aiohttp_client, sqlite_url, model_dir, **settings)
    out = await _explain(client)
    assert (out["threshold"], out["threshold_source"]) == (threshold, source)
    assert out["refuse"] == settings.get("refuse", "calibrated") and out["floor"] == threshold
    assert out["choice"] is None and out["error"]["data"]["threshold"] == threshold
    assert out["scale"] == "fused score, 0 to 1"
    for candidate in out["candidates"]:
        assert not candidate["kept"] and candidate["filter"] == "score"
        assert candidate["reason"] == (
            f"It scores {candidate['score']:g}, below the threshold {threshold:g} ({source})."
        )
        features = candidate["features"]
        assert all(v is None or 0 <= v <= 1 for v in features.values())
        assert features["example"] is None and features["learned"] is None  # none of either
        assert candidate["features_raw"]["learned"] == -1.0  # deprecated: as explain said


async def test_never_refusing_guesses_or_takes_the_default_route(
    aiohttp_client: Any, sqlite_url: str, model_dir: Path
) -> None:
    client = await _travel(aiohttp_client, sqlite_url, model_dir, refuse="never")
    out = await _explain(client)
    best = out["candidates"][0]
    assert out["choice"]["tier"] == "guess" and out["choice"]["agent_id"] == best["agent_id"]
    assert out["choice"]["reason"] == (
        f"A guess: it scores {best['score']:g}, below the threshold 0.9 (SWITCHBOARD_REFUSE=never)."
    )
    assert best["kept"] and best["reason"].startswith("Chosen: a guess")
    # a message with no words to route by is still refused: there is nothing to guess from
    hello = {**MESSAGE, "parts": [{"text": "hi there, thanks!"}]}
    resp = await client.post("/api/v1/route/explain", json={"message": hello})
    refused = (await resp.json())["error"]
    assert (refused["code"], refused["data"]["reason"]) == (-32050, "no content")

    client = await _travel(
        aiohttp_client, sqlite_url.replace(".db", "-2.db"), model_dir, refuse="never",
        default_agent="hotels",
    )  # fmt: skip
    out = await _explain(client)
    assert (out["choice"]["tier"], out["choice"]["agent_id"]) == ("default", "hotels")
    resp = await client.post("/api/v1/route/explain", json={"message": hello})
    assert (await resp.json())["choice"]["tier"] == "default"  # no content: the default route
