"""The router's metrics after real traffic (an a2a-sdk client and agent, a stream, a refused
message, an agent that is gone), scraped from ``GET /metrics`` and read with
prometheus-client's own parser."""

from __future__ import annotations

import json
from typing import Any

import httpx
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.router.observe.conftest import recording_agent, register, routed
from tests.support.sdk_clients import answer, ask, connect, send

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(client: TestClient) -> Samples:
    """Every sample of the exposition, by name and labels."""
    resp = await client.get("/metrics")
    assert resp.status == 200, await resp.text()
    assert resp.content_type == "text/plain"
    samples: Samples = {}
    for family in text_string_to_metric_families(await resp.text()):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels`` (0 when absent)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def rpc(method: str, text: str, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": "m-1", "parts": [{"text": text}]}
    if method.startswith("message/"):
        message.update(role="user", kind="message")
        message["parts"][0]["kind"] = "text"
    else:
        message["role"] = "ROLE_USER"
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message, **extra}}


async def test_traffic_moves_the_counters_and_histograms(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await routed(aiohttp_client, sqlite_url)
    async with recording_agent() as echo:
        async with recording_agent() as gone:
            await register(client, gone.url, "gone")
        await register(client, echo.url, "echo")  # "gone" no longer answers
        before = await scrape(client)
        async with httpx.AsyncClient(timeout=30.0) as http:
            sdk = await connect(http, str(client.make_url("/")))
            task = await send(sdk, ask("say hello back"))
        assert answer(task) == "echo: say hello back"

        stream = await client.post(
            "/", json=rpc("SendStreamingMessage", "say hello back"), headers={"A2A-Version": "1.0"}
        )
        events = [line for line in (await stream.text()).splitlines() if line.startswith("data:")]
        assert len(events) >= 3 and all("error" not in json.loads(e[5:]) for e in events)

        refused = await (await client.post("/", json=rpc("message/send", "qqq zzzq"))).json()
        assert refused["error"]["code"] == -32050
        failed = await (await client.post("/agents/gone", json=rpc("message/send", "hi"))).json()
        assert failed["error"]["code"] == -32052
        after = await scrape(client)

    requests = "switchboard_a2a_requests_total"
    assert moved(before, after, requests, method="SendMessage", version="1.0", outcome="ok") == 1
    assert (
        moved(before, after, requests, method="SendStreamingMessage", version="1.0", outcome="ok")
        == 1
    )
    assert (
        moved(before, after, requests, method="message/send", version="0.3", outcome="refused") == 1
    )
    assert (
        moved(
            before, after, requests, method="message/send", version="0.3", outcome="upstream_error"
        )
        == 1
    )
    seconds = "switchboard_a2a_request_seconds_count"
    assert moved(before, after, seconds, method="SendMessage", version="1.0") == 1
    assert moved(before, after, "switchboard_a2a_router_seconds_count", method="SendMessage") == 1

    upstream = "switchboard_upstream_requests_total"
    assert moved(before, after, upstream, agent="echo", kind="call", outcome="ok") == 1
    assert moved(before, after, upstream, agent="echo", kind="stream", outcome="ok") == 1
    assert moved(before, after, upstream, agent="gone", kind="call", outcome="unavailable") == 1
    latency = "switchboard_upstream_request_seconds_count"
    assert moved(before, after, latency, agent="echo", kind="stream") == 1
    assert moved(before, after, "switchboard_stream_events_total", agent="echo") == len(events)
    assert moved(before, after, "switchboard_stream_seconds_count", agent="echo") == 1
    assert value(after, "switchboard_streams_open") == value(before, "switchboard_streams_open")

    decisions = "switchboard_routing_decisions_total"
    assert moved(before, after, decisions, tier="lexical", agent="echo") == 2
    assert moved(before, after, decisions, tier="refused", agent="") == 1
    assert moved(before, after, decisions, tier="pinned", agent="gone") == 1
    assert moved(before, after, "switchboard_routing_decision_seconds_count", tier="lexical") == 2

    assert value(after, "switchboard_catalog_agents") == 2
    assert value(after, "switchboard_catalog_skills") == 2
    by_status = [k for k in after if k[0] == "switchboard_agents"]
    assert sum(after[k] for k in by_status) == 2
    assert all(dict(labels)["verification"] == "unsigned" for _, labels in by_status)
    assert value(after, "switchboard_refresh_lease_holder") == 0  # SWITCHBOARD_REFRESH off
    assert any(name == "python_info" for name, _ in after)
    assert any(name == "process_cpu_seconds_total" for name, _ in after)


async def test_no_task_ids_or_texts_in_labels(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await routed(aiohttp_client, sqlite_url)
    async with recording_agent() as echo:
        await register(client, echo.url, "echo")
        body = await (await client.post("/", json=rpc("message/send", "say hello back"))).json()
        task_id = body["result"]["id"]
        text = await (await client.get("/metrics")).text()
    assert task_id not in text
    assert "say hello back" not in text and "127.0.0.1" not in text


async def test_translations_are_counted_by_part_and_direction(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await routed(aiohttp_client, sqlite_url)
    async with recording_agent() as echo:  # an a2a-sdk 1.x agent
        await register(client, echo.url, "echo")
        before = await scrape(client)
        sent = await (await client.post("/", json=rpc("message/send", "say hello back"))).json()
        assert sent["result"]["kind"] == "task"
        stream = await client.post("/", json=rpc("message/stream", "say hello back"))
        events = [line for line in (await stream.text()).splitlines() if line.startswith("data:")]
        same = await client.post(
            "/", json=rpc("SendMessage", "say hello back"), headers={"A2A-Version": "1.0"}
        )
        assert "result" in await same.json()
        after = await scrape(client)
    count = "switchboard_translations_total"
    assert moved(before, after, count, part="request", direction="0.3->1.0") == 2
    assert moved(before, after, count, part="answer", direction="1.0->0.3") == 1
    assert moved(before, after, count, part="event", direction="1.0->0.3") == len(events) >= 3
    assert moved(before, after, count, part="request", direction="1.0->0.3") == 0
