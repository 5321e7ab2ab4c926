"""Routing by meaning end to end: real a2a-sdk clients (1.x in process, 0.3 in its own venv)
through the router to real a2a-sdk agents whose skills share no word with the messages.

The router runs with the real embedding model (loaded once per test run, see conftest) and
the calibration it ships.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.helpers.proto_helpers import get_message_text, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import AgentSkill, Part, Role

from registry.api import REGISTRY
from registry.metrics import METRICS
from router.app import create_app
from router.transport.routes import ROUTER
from tests.peers03 import client03_lines
from tests.support.helpers import AUTH, base, make_settings
from tests.support.sdk_clients import ask, connect
from tests.support.sdk_peers import serve_sdk_agent

TRAVEL = AgentSkill(
    id="air-booking",
    name="Airline reservations",
    description="Reserves seats on commercial flights and changes existing itineraries.",
    tags=["airline", "flights", "itinerary"],
    examples=["Book a flight from Paris to New York on May 3", "Change my return flight to Friday"],
)
PAYROLL = AgentSkill(
    id="salary-statements",
    name="Salary statements",
    description="Explains payslips, wage deductions and the dates salaries are paid.",
    tags=["payroll", "payslip", "wages"],
    examples=["When do salaries arrive?", "Explain the deductions on my payslip"],
)
VISION = AgentSkill(
    id="describe-picture",
    name="Picture description",
    description="Writes a caption for a photo.",
    tags=["vision", "caption"],
    examples=["Describe this photo"],
    input_modes=["image/png", "image/jpeg"],
)


class NamedEcho(AgentExecutor):
    """Answers ``<name>: <text>``, so a test sees which agent answered."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = get_message_text(context.message) if context.message else ""
        reply = new_text_message(f"{self.name}: {text}", role=Role.ROLE_AGENT)
        await event_queue.enqueue_event(reply)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


@contextlib.asynccontextmanager
async def agents() -> AsyncIterator[dict[str, str]]:
    """Three SDK agents (the travel one also serves A2A 0.3); their base URLs by name."""
    async with (
        serve_sdk_agent(
            compat=True,
            executor=NamedEcho("travel"),
            name="Skyway Travel Desk",
            description="Business travel: air tickets and itineraries.",
            skills=[TRAVEL],
        ) as travel,
        serve_sdk_agent(
            executor=NamedEcho("payroll"),
            name="Pay Office",
            description="Salaries and payroll questions for employees.",
            skills=[PAYROLL],
        ) as pay,
        serve_sdk_agent(
            executor=NamedEcho("vision"),
            name="Vision",
            description="Looks at images.",
            skills=[VISION],
        ) as vision,
    ):
        yield {"travel": travel, "payroll": pay, "vision": vision}


@pytest.fixture
async def routed(aiohttp_server: Any, sqlite_url: str, model_dir: Path) -> AsyncIterator[Any]:
    """The router (matching by meaning) with the three agents registered."""
    settings = make_settings(sqlite_url, matcher="semantic", embedding_model=str(model_dir))
    server = await aiohttp_server(create_app(settings))
    async with agents() as urls, httpx.AsyncClient() as http:
        for agent_id, url in urls.items():
            resp = await http.post(
                str(server.make_url("/api/v1/agents")),
                json={"url": url, "id": agent_id},
                headers=AUTH,
            )
            assert resp.status_code == 201, resp.text
        await server.app[REGISTRY].indexed()  # the skill texts are embedded behind the answers
        yield server, http


async def _reply(client: Any, request: Any) -> str:
    events = [event async for event in client.send_message(request)]
    assert len(events) == 1 and events[0].HasField("message"), events
    return get_message_text(events[0].message)


async def test_sdk_1x_client_reaches_the_agent_by_meaning(routed: Any) -> None:
    server, http = routed
    assert server.app[ROUTER].matcher.status.startswith("semantic")
    client = await connect(http, base(server))
    text = "get me on the earliest plane to Berlin on Tuesday"
    assert await _reply(client, ask(text)) == f"travel: {text}"
    text = "my pay this month looks lower than usual, why?"
    assert await _reply(client, ask(text)) == f"payroll: {text}"


async def test_messages_sent_at_once_are_embedded_in_batches_and_counted(routed: Any) -> None:
    server, http = routed
    batches = server.app[ROUTER].chooser.semantic.batches
    before, counted_before = (batches.batches, batches.texts), _batch_metrics()
    client = await connect(http, base(server))
    texts = [f"get me on the earliest plane to Berlin on day {n}" for n in range(6)]
    replies = await asyncio.gather(*(_reply(client, ask(text)) for text in texts))
    assert replies == [f"travel: {text}" for text in texts]
    made, embedded = batches.batches - before[0], batches.texts - before[1]
    assert embedded == 6 and 1 <= made <= 6
    counted = tuple(a - b for a, b in zip(_batch_metrics(), counted_before, strict=True))
    assert counted == (made, 6)  # switchboard_embedding_batch_texts: _count and _sum


def _batch_metrics() -> tuple[float, float]:
    """The embedding batches counted so far and the texts in them (this process)."""
    count = METRICS.get_sample_value("switchboard_embedding_batch_texts_count") or 0.0
    texts = METRICS.get_sample_value("switchboard_embedding_batch_texts_sum") or 0.0
    return count, texts


async def test_sdk_03_client_reaches_the_agent_by_meaning(routed: Any, sdk03_python: Path) -> None:
    server, _ = routed
    text = "my pay this month looks lower than usual, why?"
    [reply] = await client03_lines(sdk03_python, base(server), "send", text=text)
    assert reply["parts"][0]["text"] == f"payroll: {text}"


async def test_an_image_goes_to_the_agent_that_takes_images(routed: Any) -> None:
    server, http = routed
    client = await connect(http, base(server))
    parts = [
        Part(text="what is this?"),
        Part(url="https://files.example.com/p.png", media_type="image/png", filename="p.png"),
    ]
    assert (await _reply(client, ask(parts=parts))).startswith("vision: ")


async def test_out_of_domain_is_refused_with_the_closest_skills(routed: Any) -> None:
    server, http = routed
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "role": "ROLE_USER",
                "messageId": "m1",
                "parts": [{"text": "what's a good recipe for banana bread?"}],
            }
        },
    }
    resp = await http.post(base(server) + "/", json=body, headers={"A2A-Version": "1.0"})
    error = resp.json()["error"]
    assert error["code"] == -32050, error
    data = next(d["value"] for d in error["data"] if d["@type"].endswith("Struct"))
    assert data["tier"] == "refused"
    assert {c["agent"] for c in data["closest"]} <= {"travel", "payroll", "vision"}
    assert data["closest"], data


async def test_explain_shows_tier_score_and_margin(routed: Any) -> None:
    server, http = routed
    resp = await http.post(
        base(server) + "/api/v1/route/explain",
        json={
            "version": "1.0",
            "message": {
                "role": "ROLE_USER",
                "messageId": "x",
                "parts": [{"text": "book me something to Lisbon on the 3rd"}],
            },
        },
    )
    out = resp.json()
    assert out["choice"]["agent_id"] == "travel", out
    assert out["choice"]["tier"] == "semantic"
    assert out["choice"]["margin"] > 0 and out["score"] >= out["floor"]
    assert set(out["candidates"][0]["features"]) == {
        "skill",
        "agent",
        "example",
        "lexical",
        "learned",
    }
    assert out["matcher"].startswith("semantic")


async def test_vectors_survive_a_restart_without_recomputation(
    aiohttp_server: Any, sqlite_url: str, model_dir: Path
) -> None:
    settings = make_settings(sqlite_url, matcher="semantic", embedding_model=str(model_dir))
    async with agents() as urls, httpx.AsyncClient() as http:
        first = await aiohttp_server(create_app(settings))
        for agent_id, url in urls.items():
            resp = await http.post(
                str(first.make_url("/api/v1/agents")),
                json={"url": url, "id": agent_id},
                headers=AUTH,
            )
            assert resp.status_code == 201
        await first.app[REGISTRY].indexed()
        computed = first.app[ROUTER].matcher.semantic.vectors.computed
        assert computed >= 6  # 3 agents + 3 skills
        await first.close()
        second = await aiohttp_server(create_app(settings))
        vectors = second.app[ROUTER].matcher.semantic.vectors
        assert vectors.computed == 0
        assert len(second.app[REGISTRY].catalog.snapshot.agents) == 3
        client = await connect(http, base(second))
        text = "get me on the earliest plane to Berlin on Tuesday"
        assert await _reply(client, ask(text)) == f"travel: {text}"


async def test_missing_model_falls_back_to_words(
    aiohttp_server: Any, sqlite_url: str, tmp_path: Path
) -> None:
    settings = make_settings(
        sqlite_url, matcher="semantic", embedding_model=str(tmp_path / "no-model")
    )
    server = await aiohttp_server(create_app(settings))
    matcher = server.app[ROUTER].matcher
    assert matcher.semantic is None and "fallback" in matcher.status
    async with httpx.AsyncClient() as http:
        ready = (await http.get(str(server.make_url("/readyz")))).json()
        assert ready["status"] == "ready"
        assert any("routing by words only" in w for w in ready["warnings"]), ready
        explain = await http.post(
            str(server.make_url("/api/v1/route/explain")),
            json={
                "message": {
                    "role": "user",
                    "messageId": "x",
                    "parts": [{"kind": "text", "text": "hello"}],
                }
            },
        )
        assert "fallback" in explain.json()["matcher"]
