"""The agent the conformance runs test: the test suite's a2a-sdk task-echo agent, serving
JSON-RPC and, beside it, the binding under test (HTTP+JSON or gRPC), all on one handler.

JSON-RPC is always served (at the base URL): it is the binding Switchboard relays to. With
``transport="rest"`` the SDK's HTTP+JSON routes are mounted at the base URL too (the 1.0
paths, and the 0.3 ``/v1/...`` ones when the agent serves 0.3); with ``transport="grpc"``
the SDK's gRPC servicer listens on its own random 127.0.0.1 port. The card lists exactly
those interfaces, JSON-RPC first.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentInterface
from starlette.applications import Starlette

from tests.support.sdk_peers import TaskEchoExecutor, echo_card

TRANSPORTS = ("jsonrpc", "rest", "grpc")
"""The bindings a run can test (the runner's ``--transport``)."""


@contextlib.asynccontextmanager
async def serve_tck_agent(transport: str, *, compat: bool) -> AsyncIterator[str]:
    """Run the agent on a random 127.0.0.1 port; yield its base URL.

    ``transport`` (one of :data:`TRANSPORTS`) is the binding served beside JSON-RPC;
    ``compat``: A2A 0.3 is served as well as 1.0 (JSON-RPC and HTTP+JSON; gRPC is 1.0 only).
    """
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}: one of {', '.join(TRANSPORTS)}")
    versions = ("1.0", "0.3") if compat else ("1.0",)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections queue until uvicorn accepts: no need to wait for startup
    base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    interfaces = [
        AgentInterface(url=f"{base_url}/", protocol_binding="JSONRPC", protocol_version=v)
        for v in versions
    ]
    grpc_server: Any = None
    if transport == "grpc":
        import grpc.aio
        from a2a.server.request_handlers import GrpcHandler
        from a2a.types import a2a_pb2_grpc

        grpc_server = grpc.aio.server()
        port = grpc_server.add_insecure_port("127.0.0.1:0")
        interfaces.append(
            AgentInterface(url=f"127.0.0.1:{port}", protocol_binding="GRPC", protocol_version="1.0")
        )
    elif transport == "rest":
        interfaces += [
            AgentInterface(url=base_url, protocol_binding="HTTP+JSON", protocol_version=v)
            for v in versions
        ]
    card = echo_card(base_url, supported_interfaces=interfaces)
    handler = DefaultRequestHandler(
        agent_executor=TaskEchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes: list[Any] = list(create_agent_card_routes(agent_card=card))
    routes += create_jsonrpc_routes(request_handler=handler, rpc_url="/", enable_v0_3_compat=compat)
    if transport == "rest":
        routes += create_rest_routes(request_handler=handler, enable_v0_3_compat=compat)
    if grpc_server is not None:
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), grpc_server)
        await grpc_server.start()
    config = uvicorn.Config(Starlette(routes=routes), log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield base_url
    finally:
        server.should_exit = True
        await task
        sock.close()
        if grpc_server is not None:
            await grpc_server.stop(None)
