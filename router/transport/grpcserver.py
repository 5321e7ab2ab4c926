"""The A2A 1.0 gRPC binding: ``lf.a2a.v1.A2AService`` served with ``grpc.aio`` on
``SWITCHBOARD_GRPC_PORT``, each RPC made into the :class:`~router.forward.call.Call` the
JSON-RPC binding makes.

:class:`GrpcServer` serves the a2a-sdk's generated service (``a2a.types.a2a_pb2_grpc``) on the
HTTP server's host. For each RPC it:

1. authenticates the caller and takes its rate as the Gate does (:meth:`Gate.check
   <router.transport.gate.Gate.check>`, the metadata as headers: ``authorization``,
   ``x-api-key``); a streaming RPC also takes one of the caller's stream slots;
2. reads ``a2a-version`` (absent: 1.0, the only version of this service; 0.3 or an unknown
   one is ``VERSION_NOT_SUPPORTED``);
3. reads the request's ``tenant``: ``agents/<id>[/<rest>]`` pins the call to agent ``<id>``
   as the HTTP per-agent endpoint ``/agents/<id>`` does, the agent given ``<rest>`` (or no
   tenant) as its own (:mod:`router.transport.grpctenant`); an agent the caller cannot use
   is ``NOT_FOUND``;
4. makes the request message the equivalent 1.0 JSON-RPC request (:func:`router.transport.
   grpcwire.rpc_body`) and parses it with the JSON-RPC binding's checks
   (:func:`router.protocol.envelope.parse_request`), so a bad request gets the same error;
5. hands the call (``a2a-version``, ``a2a-extensions`` and the other client headers as its
   headers) to :meth:`Router.handle <router.forward.handler.Router.handle>`;
6. answers the reply's ``result`` as the RPC's response message, or each event of a stream as
   a ``StreamResponse``; an ``error`` becomes a gRPC status (:func:`router.transport.grpcwire.
   error_status`). A stream stops, and its upstream connection closes, as soon as the client
   cancels.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NoReturn

import grpc
from a2a.types import a2a_pb2_grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from multidict import CIMultiDict

from registry.access.clientaddr import peer_address
from registry.access.principal import Principal
from registry.settings import Settings
from router.coherence.sync import Coherence
from router.compat.dialects import served_call
from router.forward.call import Call, EventStream, Reply
from router.forward.handler import Router
from router.forward.upstream import CLIENT_HEADERS
from router.observe.grpcid import observed_rpc
from router.protocol.envelope import Request, parse_request
from router.protocol.errors import (
    INTERNAL,
    INVALID_PARAMS,
    VERSION_NOT_SUPPORTED,
    RpcError,
    error_object,
)
from router.protocol.versions import VERSION_HEADER, client_version
from router.tracing.grpcspans import traced_rpc
from router.transport.gate import Denied, Gate
from router.transport.grpctenant import pinned_by_tenant
from router.transport.grpcwire import RPCS, Rpc, error_status, result_message, rpc_body

__all__ = ["GrpcServer", "grpc_target"]

log = logging.getLogger(__name__)

_HEADERS = CLIENT_HEADERS | {VERSION_HEADER.lower()}
_DENIED_CODES = {
    401: grpc.StatusCode.UNAUTHENTICATED,
    503: grpc.StatusCode.UNAVAILABLE,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
}

Handler = Callable[[Message, grpc.aio.ServicerContext], Awaitable[Any]]


def grpc_target(host: str, port: int) -> str:
    """``host:port`` as a gRPC target (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


class GrpcServer:
    """The gRPC binding in front of ``router``: :meth:`start`, then :meth:`stop`."""

    def __init__(
        self, router: Router, gate: Gate, settings: Settings, coherence: Coherence | None = None
    ) -> None:
        """``coherence``: each call first catches up with the writes acknowledged so far."""
        self.router = router
        self.gate = gate
        self.settings = settings
        self.coherence = coherence
        self.port: int | None = None
        """The port listened on once started (``SWITCHBOARD_GRPC_PORT``, or the one picked
        for 0)."""
        self._server: grpc.aio.Server | None = None

    @property
    def base_url(self) -> str:
        """Where clients reach the HTTP endpoints (for the cards an answer carries)."""
        settings = self.settings
        if settings.public_url:
            return settings.public_url.rstrip("/")
        return f"http://{grpc_target(settings.host, settings.port)}"

    async def start(self) -> int:
        """Listen on ``SWITCHBOARD_HOST``:``SWITCHBOARD_GRPC_PORT``; the port listened on.
        OSError when the port cannot be bound (taken: no port sharing)."""
        settings = self.settings
        server = grpc.aio.server(
            options=[
                # a port in use is an error, except among the workers of one `serve --workers`
                ("grpc.so_reuseport", 1 if (settings.workers or 1) > 1 else 0),
                ("grpc.max_receive_message_length", settings.max_request_bytes),
            ]
        )
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(_Servicer(self), server)
        address = grpc_target(settings.host, settings.grpc_port or 0)
        try:
            port = server.add_insecure_port(address)
        except RuntimeError as error:
            port, cause = 0, error
        else:
            cause = None
        if not port:
            raise OSError(f"cannot serve gRPC on {address} (SWITCHBOARD_GRPC_PORT)") from cause
        await server.start()
        self._server, self.port = server, port
        log.info("serving the A2A gRPC binding on %s", grpc_target(settings.host, port))
        return port

    async def stop(self, grace: float | None = None) -> None:
        """Stop listening; calls in flight get ``grace`` seconds, then are cancelled."""
        if self._server is not None:
            await self._server.stop(grace)
            self._server, self.port = None, None

    @observed_rpc
    @traced_rpc
    async def unary(self, rpc: Rpc, request: Message, context: grpc.aio.ServicerContext) -> Any:
        """Answer one unary RPC."""
        caller = await self._admit(context)
        call = await self._call(rpc, request, context, caller)
        answer = await self.router.handle(call)
        if isinstance(answer, EventStream):  # not for a unary method: never happens
            await answer.aclose()
            await _abort_error(context, _internal("a stream answered a unary call"))
        return await _result(context, rpc, answer.body)

    @observed_rpc
    @traced_rpc
    async def stream(self, rpc: Rpc, request: Message, context: grpc.aio.ServicerContext) -> None:
        """Answer one server-streaming RPC, writing each event until the stream ends or the
        client cancels (the cancellation reaches the upstream read, which closes)."""
        caller = await self._admit(context)
        call = await self._call(rpc, request, context, caller)
        try:
            self.gate.take_stream(caller)
        except Denied as denied:
            await _abort_denied(context, denied)
        try:
            answer = await self.router.handle(call)
            if isinstance(answer, Reply):
                await context.write(await _result(context, rpc, answer.body))
                return
            try:
                async for body, _event in answer.events:
                    await context.write(await _result(context, rpc, body))
            finally:
                await answer.aclose()
        finally:
            self.gate.close_stream(caller)

    async def _admit(self, context: grpc.aio.ServicerContext) -> Principal:
        if self.coherence is not None and self.coherence.behind:
            await self.coherence.fresh()
        metadata = _metadata(context)
        client = self.gate.client(peer_address(context.peer() or ""), metadata)
        try:
            return await self.gate.check(metadata, client)
        except Denied as denied:
            await _abort_denied(context, denied)

    async def _call(
        self, rpc: Rpc, request: Message, context: grpc.aio.ServicerContext, caller: Principal
    ) -> Call:
        metadata = _metadata(context)
        pinned, tenant = pinned_by_tenant(request.tenant)  # type: ignore[attr-defined]
        if pinned is not None:  # the router's address, never the agent's tenant
            request = _with_tenant(request, tenant)
        try:
            parsed = self._parse(rpc, request, metadata.get(VERSION_HEADER))
        except RpcError as error:
            await _abort_error(context, error_object("1.0", error))
        if pinned is not None:
            try:
                self.router.check_pinned(caller, pinned)
            except RpcError as error:  # an unknown resource, as gRPC says it
                await _abort_error(context, error_object("1.0", error), grpc.StatusCode.NOT_FOUND)
        headers = CIMultiDict((k, v) for k, v in metadata.items() if k.lower() in _HEADERS)
        headers[VERSION_HEADER] = "1.0"
        return Call(
            parsed,
            headers=headers,
            pinned=pinned,
            caller=caller,
            base_url=self.base_url,
            binding="GRPC",
        )

    def _parse(self, rpc: Rpc, request: Message, version: str | None) -> Request:
        if version is not None and version.strip() and client_version(version) != "1.0":
            raise RpcError(
                VERSION_NOT_SUPPORTED,
                f"A2A-Version {version.strip()!r} is not served over gRPC: Switchboard's gRPC "
                "binding is A2A 1.0 (lf.a2a.v1.A2AService); send a2a-version 1.0",
                {"requestedVersion": version.strip(), "supportedVersions": ["1.0"]},
            )
        settings = self.settings
        try:
            body = rpc_body(rpc, request)
        except (json_format.Error, ValueError) as problem:  # e.g. NaN in a Struct value
            raise RpcError(
                INVALID_PARAMS, f"The {rpc.name} request has no JSON form: {problem}", {}
            ) from None
        return parse_request(
            body,
            "1.0",
            "1.0",
            max_depth=settings.max_json_depth,
            dialects=served_call,
        )


class _Servicer(a2a_pb2_grpc.A2AServiceServicer):
    """The generated servicer, each RPC answered by :class:`GrpcServer`."""

    def __init__(self, server: GrpcServer) -> None:
        for rpc in RPCS.values():
            serve = server.stream if rpc.streaming else server.unary
            setattr(self, rpc.name, _bound(serve, rpc))


def _bound(
    serve: Callable[[Rpc, Message, grpc.aio.ServicerContext], Awaitable[Any]], rpc: Rpc
) -> Handler:
    async def handler(request: Message, context: grpc.aio.ServicerContext) -> Any:
        return await serve(rpc, request, context)

    handler.__name__ = rpc.name
    return handler


def _with_tenant(request: Message, tenant: str) -> Message:
    """A copy of ``request`` whose ``tenant`` is ``tenant`` (empty: none)."""
    copy = type(request)()
    copy.CopyFrom(request)
    copy.tenant = tenant  # type: ignore[attr-defined]
    return copy


def _metadata(context: grpc.aio.ServicerContext) -> CIMultiDict[str]:
    """The call's text metadata as headers (binary ``-bin`` entries left out)."""
    return CIMultiDict(
        (key, value)
        for key, value in context.invocation_metadata() or ()
        if isinstance(value, str) and not key.endswith("-bin")
    )


async def _result(context: grpc.aio.ServicerContext, rpc: Rpc, body: Mapping[str, Any]) -> Any:
    """The response message of a JSON-RPC body, or the abort of its error."""
    error = body.get("error")
    if isinstance(error, Mapping):
        await _abort_error(context, error)
    try:
        return result_message(rpc, body.get("result"))
    except (json_format.ParseError, TypeError, ValueError) as problem:
        log.error("a %s result does not fit its proto message: %s", rpc.name, problem)
        await _abort_error(context, _internal(f"the answer does not fit {rpc.name}: {problem}"))


def _internal(detail: str) -> dict[str, Any]:
    return error_object("1.0", RpcError(INTERNAL, detail, {}))


async def _abort_error(
    context: grpc.aio.ServicerContext,
    error: Mapping[str, Any],
    code: grpc.StatusCode | None = None,
    extra: tuple[tuple[str, str], ...] = (),
) -> NoReturn:
    status, message, trailer = error_status(error, code)
    await context.abort(status, message, trailing_metadata=(*trailer, *extra))
    raise AssertionError("context.abort returned")  # pragma: no cover - it always raises


async def _abort_denied(context: grpc.aio.ServicerContext, denied: Denied) -> NoReturn:
    extra = tuple((key.lower(), value) for key, value in denied.headers.items())
    await _abort_error(
        context, error_object("1.0", denied.error), _DENIED_CODES.get(denied.status), extra
    )
