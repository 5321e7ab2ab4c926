"""Spans of the routing core (router.tracing.spans), recorded by an in-memory exporter around
a real router, the official a2a-sdk 1.x client and a real a2a-sdk 1.x agent whose server
records the ``traceparent`` it is sent: one trace spans client -> router -> agent."""

from __future__ import annotations

import json
from typing import Any

import httpx
from a2a.types import GetTaskRequest
from aiohttp import web
from aiohttp.test_utils import TestServer
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from registry.api import REGISTRY
from router.app import create_app
from router.tracing import spans as names
from tests.router.tracing.conftest import Spans, recording_agent
from tests.support.helpers import base, card_v1, make_settings
from tests.support.sdk_clients import answer, ask, connect, send

CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
SECRET = "the launch code is tangerine"


async def _switchboard(aiohttp_server: Any, sqlite_url: str) -> TestServer:
    return await aiohttp_server(create_app(make_settings(sqlite_url)))


def _hex_span(span: ReadableSpan) -> str:
    assert span.context is not None
    return format(span.context.span_id, "016x")


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _said(span: ReadableSpan) -> str:
    """Everything a span says: its name, attributes, events and status."""
    events = [(e.name, dict(e.attributes or {})) for e in span.events]
    return repr((span.name, dict(span.attributes or {}), events, span.status.description))


async def test_one_trace_from_the_client_through_the_router_to_the_agent(
    aiohttp_server: Any, sqlite_url: str, spans: Spans
) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url)
    async with recording_agent() as agent:
        await server.app[REGISTRY].register_url(agent.url, "echo")
        headers = {"traceparent": TRACEPARENT, "tracestate": "vendor=blue"}
        async with httpx.AsyncClient(timeout=30, headers=headers) as http:
            client = await connect(http, base(server))
            task = await send(client, ask(f"echo {SECRET}"))
            assert SECRET in answer(task)
            (request,) = await spans.ended("A2A SendMessage")
            await client.get_task(GetTaskRequest(id=task.id))
            (get,) = await spans.ended("A2A GetTask")

    # the server span continues the client's trace, and says what was asked and decided
    assert request.kind is SpanKind.SERVER and request.context is not None
    assert request.context.trace_id == int(CLIENT_TRACE, 16)
    assert _parent(request) == int(CLIENT_SPAN, 16)
    attributes = dict(request.attributes or {})
    assert attributes[names.A2A_METHOD] == "SendMessage"
    assert attributes[names.A2A_VERSION] == "1.0"
    assert attributes[names.AGENT] == "echo"
    assert attributes[names.SKILL] == "sdk-echo"
    assert attributes[names.TIER] == "lexical"
    assert isinstance(attributes[names.SCORE], float) and attributes[names.SCORE] > 0
    assert attributes["http.response.status_code"] == 200
    assert attributes["http.route"] == "/"

    # the decision, and the upstream call, are its children
    choose = spans.one("choose agent")
    assert _parent(choose) == request.context.span_id
    assert dict(choose.attributes or {})[names.TIER] == "lexical"
    assert dict(choose.attributes or {})[names.AGENT] == "echo"
    upstream = [s for s in spans.named("agent SendMessage")]
    assert len(upstream) == 1
    call = upstream[0]
    assert call.kind is SpanKind.CLIENT and _parent(call) == request.context.span_id
    assert call.context is not None and call.context.trace_id == int(CLIENT_TRACE, 16)
    call_attributes = dict(call.attributes or {})
    assert call_attributes[names.AGENT] == "echo"
    assert call_attributes[names.A2A_BINDING] == "JSONRPC"
    assert call_attributes["server.port"] == agent.port
    assert call.status.status_code is StatusCode.UNSET

    # the agent was sent the router's client span as its parent (not the client's span)
    assert agent.traceparents[0] == f"00-{CLIENT_TRACE}-{_hex_span(call)}-01"
    assert agent.tracestates[0] == "vendor=blue"

    # a task call goes to the task's owner: tier "task"
    get_attributes = dict(get.attributes or {})
    assert get_attributes[names.TIER] == "task" and get_attributes[names.AGENT] == "echo"
    (get_call,) = spans.named("agent GetTask")
    assert _parent(get_call) == get.context.span_id  # type: ignore[union-attr]
    assert agent.traceparents[1] == f"00-{CLIENT_TRACE}-{_hex_span(get_call)}-01"

    # no span carries the message's text
    assert not [s.name for s in spans.all() if "tangerine" in _said(s)]


async def test_a_stream_has_a_relay_span_counting_its_events(
    aiohttp_server: Any, sqlite_url: str, spans: Spans
) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url)
    async with recording_agent() as agent:
        await server.app[REGISTRY].register_url(agent.url, "echo")
        async with httpx.AsyncClient(timeout=30) as http:  # no traceparent: a new trace
            client = await connect(http, base(server), streaming=True)
            events = [event async for event in client.send_message(ask("echo one two three"))]
            (request,) = await spans.ended("A2A SendStreamingMessage")
    assert len(events) > 3  # the task, working, one artifact chunk per word, completed
    assert request.parent is None and request.context is not None
    trace_id = request.context.trace_id

    relay = spans.one("relay stream")
    relay_attributes = dict(relay.attributes or {})
    assert _parent(relay) == request.context.span_id
    assert relay_attributes[names.STREAM_EVENTS] == len(events)
    first = relay_attributes[names.FIRST_EVENT_MS]
    assert isinstance(first, float) and first > 0
    assert relay.end_time is not None and relay.start_time is not None
    assert first <= (relay.end_time - relay.start_time) / 1e6
    assert relay.status.status_code is StatusCode.UNSET

    (call,) = spans.named("agent SendStreamingMessage")
    assert call.kind is SpanKind.CLIENT and _parent(call) == request.context.span_id
    assert dict(call.attributes or {})[names.STREAM_EVENTS] == len(events)
    (sent,) = agent.traceparents
    assert sent.startswith(f"00-{trace_id:032x}-{_hex_span(call)}-")  # flags: sampled (+random)


async def test_an_upstream_failure_marks_the_spans_as_errors(
    aiohttp_server: Any, sqlite_url: str, spans: Spans
) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url)
    async with recording_agent() as agent:
        await server.app[REGISTRY].register_url(agent.url, "echo")
    # the agent is gone: its port refuses connections
    message = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "echo hello"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.post(base(server) + "/", json=body, headers={"A2A-Version": "1.0"})
    assert reply.json()["error"]["code"] == -32052, reply.text
    (request,) = await spans.ended("A2A SendMessage")
    (call,) = spans.named("agent SendMessage")
    assert call.status.status_code is StatusCode.ERROR
    assert "connection refused" in (call.status.description or "")
    assert dict(call.attributes or {})[names.ERROR_CODE] == -32052
    assert request.status.status_code is StatusCode.ERROR
    assert dict(request.attributes or {})[names.ERROR_CODE] == -32052


async def test_a_refused_message_is_a_decision_not_an_error(
    aiohttp_server: Any, sqlite_url: str, spans: Spans
) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url)
    async with recording_agent() as agent:
        await server.app[REGISTRY].register_url(agent.url, "echo")
        message = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "zebra quilting"}]}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        async with httpx.AsyncClient(timeout=30) as http:
            reply = await http.post(base(server) + "/", json=body, headers={"A2A-Version": "1.0"})
        assert reply.json()["error"]["code"] == -32050, reply.text
        (request,) = await spans.ended("A2A SendMessage")
    choose = spans.one("choose agent")
    for span in (request, choose):
        attributes = dict(span.attributes or {})
        assert attributes[names.TIER] == "refused" and attributes[names.ERROR_CODE] == -32050
        assert span.status.status_code is StatusCode.UNSET
    assert agent.traceparents == [] and not spans.named("agent SendMessage")


async def test_translation_spans_for_a_03_client_of_a_10_agent(
    aiohttp_server: Any, sqlite_url: str, spans: Spans
) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url)
    async with recording_agent() as agent:
        await server.app[REGISTRY].register_url(agent.url, "echo")
        message = {"role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "echo"}]}
        body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
        async with httpx.AsyncClient(timeout=30) as http:
            reply = await http.post(base(server) + "/", json=body)  # no A2A-Version: 0.3
        assert reply.json()["result"]["kind"] == "task", reply.text
        (request,) = await spans.ended("A2A message/send")
    assert dict(request.attributes or {})[names.A2A_VERSION] == "0.3"
    params, result = spans.one("translate params"), spans.one("translate result")
    assert dict(params.attributes or {})[names.TRANSLATION_FROM] == "0.3"
    assert dict(params.attributes or {})[names.TRANSLATION_TO] == "1.0"
    assert dict(result.attributes or {})[names.TRANSLATION_FROM] == "1.0"
    assert dict(result.attributes or {})[names.TRANSLATION_TO] == "0.3"
    for span in (params, result):
        assert _parent(span) == request.context.span_id  # type: ignore[union-attr]
    (call,) = spans.named("agent SendMessage")
    assert dict(call.attributes or {})[names.A2A_VERSION] == "1.0"


async def test_without_a_provider_the_clients_traceparent_passes_through(
    aiohttp_server: Any, sqlite_url: str
) -> None:
    """The API's no-op: no span of the router's, the agent continues the client's span."""
    server = await _switchboard(aiohttp_server, sqlite_url)
    async with recording_agent() as agent:
        await server.app[REGISTRY].register_url(agent.url, "echo")
        async with httpx.AsyncClient(timeout=30, headers={"traceparent": TRACEPARENT}) as http:
            client = await connect(http, base(server))
            await send(client, ask("echo hello"))
    assert agent.traceparents == [TRACEPARENT]


async def test_a_stream_cut_by_the_agent_marks_the_relay_and_the_call_as_errors(
    aiohttp_server: Any, sqlite_url: str, spans: Spans
) -> None:
    """An agent that sends the task, then drops the connection: -32053 as the last event."""

    async def card(request: web.Request) -> web.Response:
        return web.json_response(card_v1(str(request.url.origin()), skills=[_SKILL]))

    async def rpc(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        task = {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}
        answer = {"jsonrpc": "2.0", "id": body["id"], "result": {"task": task}}
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(f"data: {json.dumps(answer)}\r\n\r\n".encode())
        assert request.transport is not None
        request.transport.close()  # cut mid-stream
        return response

    app = web.Application()
    app.router.add_get("/.well-known/agent-card.json", card)
    app.router.add_post("/a2a", rpc)
    cutter = await aiohttp_server(app)
    server = await _switchboard(aiohttp_server, sqlite_url)
    await server.app[REGISTRY].register_url(base(cutter), "cutter")
    message = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "echo please"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {}}
    body["params"] = {"message": message}
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.post(base(server) + "/", json=body, headers={"A2A-Version": "1.0"})
    assert '"code": -32053' in reply.text or '"code":-32053' in reply.text, reply.text
    (request,) = await spans.ended("A2A SendStreamingMessage")
    relay = spans.one("relay stream")
    assert _parent(relay) == request.context.span_id  # type: ignore[union-attr]
    assert dict(relay.attributes or {})[names.STREAM_EVENTS] == 2  # the task, the error
    assert dict(relay.attributes or {})[names.ERROR_CODE] == -32053
    assert relay.status.status_code is StatusCode.ERROR
    (call,) = spans.named("agent SendStreamingMessage")
    assert call.status.status_code is StatusCode.ERROR
    assert dict(call.attributes or {})[names.ERROR_CODE] == -32053
    assert dict(call.attributes or {})[names.STREAM_EVENTS] == 1


_SKILL = {
    "id": "echo",
    "name": "Echo",
    "description": "Echoes what it is sent.",
    "tags": ["echo"],
    "examples": ["echo this"],
}


def test_active_follows_the_global_provider(spans: Spans) -> None:
    """``active`` reads the API's global: on with the SDK provider installed, off once it is
    taken away, on again when one is set (no answer kept from before)."""
    from opentelemetry import trace

    from tests.router.tracing.conftest import _reset_global_provider

    assert names.active()
    provider = trace.get_tracer_provider()
    _reset_global_provider()
    assert not names.active()
    trace.set_tracer_provider(provider)
    assert names.active()
