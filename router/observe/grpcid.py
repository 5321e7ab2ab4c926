"""The request id on the gRPC side: :func:`observed_rpc` gives each RPC its
:class:`~router.observe.requestid.Observed`, from the client's ``x-request-id`` metadata when it
is sane (else a new id), and returns the id to the client as initial metadata
(``x-request-id``), as the HTTP side does with its header (:mod:`router.observe.http`)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from router.observe.requestid import Observed, new_request_id, observing, sane_request_id

__all__ = ["GRPC_REQUEST_ID", "observed_rpc"]

GRPC_REQUEST_ID = "x-request-id"
"""The metadata key of the request id (gRPC metadata keys are lower case)."""

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def observed_rpc(serve: F) -> F:
    """Decorate ``serve(self, rpc, request, context)``: the RPC's request id, current while it
    is served and sent back first as initial metadata."""

    @functools.wraps(serve)
    async def observed(self: Any, rpc: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        given = None
        for key, value in context.invocation_metadata() or ():
            if key.lower() == GRPC_REQUEST_ID and isinstance(value, str):
                given = sane_request_id(value)
        observed = Observed(given or new_request_id())
        restore = observing(observed)
        try:
            await context.send_initial_metadata(((GRPC_REQUEST_ID, observed.request_id),))
            return await serve(self, rpc, request, context)
        finally:
            restore()

    return observed  # type: ignore[return-value]
