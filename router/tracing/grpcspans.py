"""The server span of an RPC of the gRPC binding (:mod:`router.transport.grpcserver`).

:func:`traced_rpc` wraps ``GrpcServer.unary`` and ``GrpcServer.stream``: the span continues
the ``traceparent``/``tracestate`` of the call's metadata, is named ``gRPC <RPC>`` until the
core names it after the A2A method (:func:`router.tracing.spans.on_request`), and records the
gRPC status the call ended with. No grpc import: the servicer context is only asked for its
metadata and code.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry import propagate
from opentelemetry.trace import SpanKind

from router.tracing.spans import active, tracer

__all__ = ["GRPC_STATUS", "RPC_METHOD", "RPC_SERVICE", "RPC_SYSTEM", "traced_rpc"]

RPC_SYSTEM = "rpc.system"
RPC_SERVICE = "rpc.service"
RPC_METHOD = "rpc.method"
GRPC_STATUS = "rpc.grpc.status_code"
_SERVICE = "lf.a2a.v1.A2AService"
_CLIENT_GONE = "switchboard.client_gone"


def traced_rpc(serve: Callable[..., Awaitable[Any]]) -> Any:
    """Wrap ``serve(self, rpc, request, context)`` in the RPC's server span."""

    @functools.wraps(serve)
    async def wrapper(self: Any, rpc: Any, request: Any, context: Any) -> Any:
        if not active():
            return await serve(self, rpc, request, context)
        metadata = {
            key: value
            for key, value in context.invocation_metadata() or ()
            if isinstance(value, str)
        }
        with tracer().start_as_current_span(
            f"gRPC {rpc.name}",
            context=propagate.extract(metadata),
            kind=SpanKind.SERVER,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            span.set_attributes({RPC_SYSTEM: "grpc", RPC_SERVICE: _SERVICE, RPC_METHOD: rpc.name})
            try:
                return await serve(self, rpc, request, context)
            except asyncio.CancelledError:
                span.set_attribute(_CLIENT_GONE, True)
                raise
            finally:
                code = context.code()  # a grpc.StatusCode, whose value is (number, name)
                span.set_attribute(GRPC_STATUS, code.value[0] if code is not None else 0)

    return wrapper
