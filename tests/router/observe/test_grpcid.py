"""router.observe.grpcid: a gRPC call's ``x-request-id`` metadata is its request id, returned
as initial metadata and passed to the agent; an insane one is replaced."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import a2a_pb2

from router.transport.routes import GRPC_ENDPOINT
from tests.router.observe.conftest import recording_agent, register, routed
from tests.support.sdk_clients import ask

grpc = pytest.importorskip("grpc")
a2a_pb2_grpc = pytest.importorskip("a2a.types.a2a_pb2_grpc")


async def test_grpc_calls_carry_the_clients_request_id(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await routed(aiohttp_client, sqlite_url, grpc_port=0)
    target = f"127.0.0.1:{client.app[GRPC_ENDPOINT].port}"
    async with recording_agent() as echo, grpc.aio.insecure_channel(target) as channel:
        await register(client, echo.url, "echo")
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        call = stub.SendMessage(
            ask("say hello back"),
            metadata=(("a2a-version", "1.0"), ("x-request-id", "grpc-req-17")),
        )
        assert dict(await call.initial_metadata())["x-request-id"] == "grpc-req-17"
        assert (await call).task.id
        assert echo.headers[-1]["x-request-id"] == "grpc-req-17"

        stream = stub.SendStreamingMessage(
            ask("say hello back"),
            metadata=(("x-request-id", "no spaces allowed"),),
        )
        given = dict(await stream.initial_metadata())["x-request-id"]
        assert given != "no spaces allowed" and len(given) == 32
        assert [event async for event in stream]
        assert echo.headers[-1]["x-request-id"] == given

        rid = (("x-request-id", "r-2"),)
        failed = stub.GetTask(a2a_pb2.GetTaskRequest(id="nope"), metadata=rid)
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await failed
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
        assert dict(await failed.initial_metadata())["x-request-id"] == "r-2"
