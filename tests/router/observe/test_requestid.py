"""Request ids: the client's ``X-Request-ID`` kept when sane, else a new one; returned on
every response (errors and streams too) and sent to the agent."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from router.observe.requestid import (
    Observed,
    RequestContextFilter,
    observing,
    sane_request_id,
)
from tests.router.observe.conftest import recording_agent, register, routed

SEND = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "message/send",
    "params": {
        "message": {
            "kind": "message",
            "role": "user",
            "messageId": "m-1",
            "parts": [{"kind": "text", "text": "say hello back"}],
        }
    },
}


@pytest.mark.parametrize("value", ["abc", "0f1e-2d3c", "req_1.2:3/4+5=6@x", "a" * 128])
def test_sane_ids_are_kept(value: str) -> None:
    assert sane_request_id(value) == value


@pytest.mark.parametrize("value", [None, "", "a" * 129, "has space", "new\nline", "é", "<script>"])
def test_other_ids_are_not(value: str | None) -> None:
    assert sane_request_id(value) is None


async def test_the_id_reaches_the_agent_and_comes_back(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await routed(aiohttp_client, sqlite_url)
    async with recording_agent() as echo:
        await register(client, echo.url, "echo")
        given = await client.post("/", json=SEND, headers={"X-Request-ID": "client-42"})
        assert "result" in await given.json()
        assert given.headers["X-Request-ID"] == "client-42"
        assert echo.headers[-1]["x-request-id"] == "client-42"

        made = await client.post("/", json=SEND, headers={"X-Request-ID": "bad id\tvalue"})
        assert "result" in await made.json()
        new = made.headers["X-Request-ID"]
        assert len(new) == 32 and new != "client-42"
        assert echo.headers[-1]["x-request-id"] == new

        stream = dict(SEND, method="message/stream")
        streamed = await client.post("/", json=stream, headers={"X-Request-ID": "stream-7"})
        await streamed.read()
        assert streamed.headers["Content-Type"].startswith("text/event-stream")
        assert streamed.headers["X-Request-ID"] == "stream-7"
        assert echo.headers[-1]["x-request-id"] == "stream-7"


async def test_every_response_has_one(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await routed(aiohttp_client, sqlite_url)
    ids = set()
    for path in ("/healthz", "/no/such/path", "/api/v1/agents/nobody"):
        resp = await client.get(path)
        ids.add(resp.headers["X-Request-ID"])
    bad = await client.post("/", data=b"{not json", headers={"X-Request-ID": "broken-1"})
    assert (await bad.json())["error"]["code"] == -32700
    assert bad.headers["X-Request-ID"] == "broken-1"
    assert len(ids) == 3


def _record(**attrs: Any) -> logging.LogRecord:
    record = logging.LogRecord("x", logging.INFO, "f", 1, "msg", (), None)
    record.__dict__.update(attrs)
    return record


def test_a_record_gets_the_known_fields_of_the_current_request() -> None:
    assert RequestContextFilter().filter(plain := _record())
    assert not hasattr(plain, "request_id")  # no request: nothing added
    observed = Observed("r1", method="SendMessage", version="1.0", agent_id="echo")
    restore = observing(observed)
    try:
        record = _record(agent_id="set by the caller")
        assert RequestContextFilter().filter(record)
        assert (record.request_id, record.method, record.version) == ("r1", "SendMessage", "1.0")
        assert record.agent_id == "set by the caller"  # never overwritten
        for unknown in ("tier", "task_id", "outcome", "duration_ms", "upstream_ms"):
            assert not hasattr(record, unknown)
        observed.duration, observed.upstream_seconds = 0.0123456, 0.0104
        observed.outcome = "ok"
        record = _record(upstream_ms=1.0)
        RequestContextFilter().filter(record)
        assert (record.duration_ms, record.upstream_ms, record.outcome) == (12.346, 1.0, "ok")
    finally:
        restore()
