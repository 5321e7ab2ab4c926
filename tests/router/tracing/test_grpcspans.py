"""The gRPC binding's server span (router.tracing.grpcspans): a gRPC client's traceparent (in
its metadata) continued through the router to a real a2a-sdk agent."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import a2a_pb2
from aiohttp.test_utils import TestServer
from opentelemetry.trace import SpanKind, StatusCode

from registry.api import REGISTRY
from router.app import create_app
from router.tracing import spans as names
from router.tracing.grpcspans import GRPC_STATUS, RPC_METHOD
from router.transport.routes import GRPC_ENDPOINT
from tests.router.tracing.conftest import Spans, recording_agent
from tests.support.helpers import make_settings
from tests.support.sdk_clients import ask

grpc = pytest.importorskip("grpc")
a2a_pb2_grpc = pytest.importorskip("a2a.types.a2a_pb2_grpc")

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


async def test_a_grpc_call_continues_the_clients_trace_to_the_agent(
    aiohttp_server: Any, sqlite_url: str, spans: Spans
) -> None:
    server: TestServer = await aiohttp_server(create_app(make_settings(sqlite_url, grpc_port=0)))
    target = f"127.0.0.1:{server.app[GRPC_ENDPOINT].port}"
    metadata = (("a2a-version", "1.0"), ("traceparent", f"00-{TRACE}-{PARENT}-01"))
    async with recording_agent() as agent:
        await server.app[REGISTRY].register_url(agent.url, "echo")
        async with grpc.aio.insecure_channel(target) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            answer = await stub.SendMessage(ask("echo over grpc"), metadata=metadata)
            assert answer.HasField("task")
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await stub.GetTask(a2a_pb2.GetTaskRequest(id="nope"), metadata=metadata)
            assert failed.value.code() is grpc.StatusCode.NOT_FOUND
        sent, missing = await spans.ended("A2A SendMessage"), await spans.ended("A2A GetTask")

    (request,) = sent
    assert request.kind is SpanKind.SERVER and request.context is not None
    assert request.context.trace_id == int(TRACE, 16)
    assert request.parent is not None and request.parent.span_id == int(PARENT, 16)
    attributes = dict(request.attributes or {})
    assert attributes[RPC_METHOD] == "SendMessage" and attributes[GRPC_STATUS] == 0
    assert attributes[names.AGENT] == "echo" and attributes[names.TIER] == "lexical"
    (call,) = spans.named("agent SendMessage")
    assert call.parent is not None and call.parent.span_id == request.context.span_id
    assert call.context is not None
    assert agent.traceparents[0].startswith(f"00-{TRACE}-{call.context.span_id:016x}-")

    (lost,) = missing
    lost_attributes = dict(lost.attributes or {})
    assert lost_attributes[GRPC_STATUS] == grpc.StatusCode.NOT_FOUND.value[0]
    assert lost_attributes[names.ERROR_CODE] == -32001
    assert lost.status.status_code is StatusCode.UNSET  # the caller's mistake
