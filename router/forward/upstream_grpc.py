"""Calling agents over the A2A 1.0 gRPC binding (service ``lf.a2a.v1.A2AService``): the edge
:class:`~router.forward.upstream.Upstream` uses for a target whose binding is ``GRPC``, so
that its answers are JSON-RPC response objects like every other binding's.

This module imports ``grpcio`` (the ``grpc`` extra); :mod:`router.forward.upstream` imports it
only when a gRPC agent is called. The conversions are :mod:`router.transport.grpcwire`'s:
the 1.0 JSON-RPC params become the RPC's request message (unknown fields refused: -32602),
each response message its proto3 JSON ``result``, and an agent's gRPC status the JSON-RPC
error its ``google.rpc.ErrorInfo`` reason names (the status table read backwards).

:class:`GrpcEdge` keeps one ``grpc.aio`` channel per agent URL (``host:port``, plaintext;
``grpcs://`` or ``https://`` for TLS). With an address policy the host is resolved and checked
before the channel connects (to the checked address, never a name resolved again later);
a channel whose agent became unreachable is dropped, so the next call resolves again. Through
the outbound proxy (``SWITCHBOARD_OUTBOUND_PROXY``, unless ``SWITCHBOARD_OUTBOUND_NO_PROXY``
lists the agent) grpcio opens an HTTP ``CONNECT`` tunnel to the agent's name, every address
of which the guard accepted first; grpcio speaks plain HTTP to a proxy, so an ``https://``
proxy refuses gRPC agents (-32052) unless the no-proxy list names them.
Failures have :class:`~router.forward.upstream.Upstream`'s shapes: -32052 when the call does
not get through (``UNAVAILABLE``, ``DEADLINE_EXCEEDED``, a refused address, a refused
credential), -32053 when a stream breaks after its first event, -32006 for an answer over
the size limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
from google.protobuf import json_format
from multidict import CIMultiDict
from yarl import URL

from registry.egress import OutboundProxy
from registry.errors import RegistryError
from registry.netguard import AddressPolicy, GuardedResolver, check_host
from router.choose.choice import GRPC, Target
from router.forward.credentials import OutboundAuth
from router.forward.headers import reply_extensions
from router.protocol.errors import (
    AGENT_UNAVAILABLE,
    INVALID_AGENT_RESPONSE,
    INVALID_PARAMS,
    STREAM_FAILED,
    UNSUPPORTED,
    RpcError,
)
from router.transport.grpcwire import (
    RPCS,
    SERVICE,
    STATUS_DETAILS_KEY,
    Rpc,
    request_message,
    result_json,
    status_error,
)

__all__ = [
    "Address",
    "ErrorShape",
    "GrpcEdge",
    "HeaderSource",
    "Owner",
    "grpc_address",
    "target_of",
]

_KEY = re.compile(r"[0-9a-z_.-]+")
_SKIPPED = frozenset({"content-type", "accept", "user-agent", "te", "host"})
_REFUSED = "the agent refused the call: it needs an outbound credential, or another one"


class _Health(Protocol):
    def failed(self, agent_id: str, reason: str) -> None: ...

    def answered(self, agent_id: str) -> None: ...


class Owner(Protocol):
    """What the edge reads from its :class:`~router.forward.upstream.Upstream`: the limits,
    the address policy and the observers it is given later."""

    connect_timeout: float
    read_timeout: float
    max_body_bytes: int
    policy: AddressPolicy | None
    proxy: OutboundProxy | None
    user_agent: str
    health: _Health | None
    auth: OutboundAuth | None


@dataclass(frozen=True)
class Address:
    """Where a gRPC agent listens: host, port, and whether over TLS."""

    host: str
    port: int
    tls: bool

    def url(self) -> URL:
        """The address as an http(s) URL, for the address policy."""
        return URL.build(scheme="https" if self.tls else "http", host=self.host, port=self.port)


def grpc_address(url: str) -> Address:
    """The address of a gRPC interface URL: ``host:port`` (plaintext), ``grpc://`` or
    ``http://`` (plaintext), ``grpcs://`` or ``https://`` (TLS); the port defaults to 443
    (TLS) or 80. ValueError saying why for anything else."""
    text = url.strip()
    if "://" not in text:
        text = "grpc://" + text
    try:
        parsed = URL(text)
        scheme, host, port = parsed.scheme.lower(), parsed.host, parsed.explicit_port
    except (ValueError, TypeError):
        raise ValueError("the gRPC target cannot be parsed (host:port expected)") from None
    if scheme not in ("grpc", "grpcs", "http", "https") or not host:
        raise ValueError("a gRPC target is host:port, or grpc(s)://host:port")
    tls = scheme in ("grpcs", "https")
    return Address(host, port or (443 if tls else 80), tls)


HeaderSource = Callable[[Target, Mapping[str, str], str], Awaitable[Mapping[str, str]]]
"""The headers of a call (forwarded, credential, version): ``Upstream._headers``."""
ErrorShape = Callable[[Target, int, str], RpcError]
"""An error with ``data = {"agent", "url", "reason"}``: ``Upstream._error``."""


class GrpcEdge:
    """gRPC calls and streams to agents for ``owner`` (an Upstream), over pooled channels;
    ``headers`` gives each call's headers (sent as metadata), ``failure`` shapes errors."""

    def __init__(self, owner: Owner, headers: HeaderSource, failure: ErrorShape) -> None:
        self.owner = owner
        self._headers = headers
        self._failure = failure
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._closing: set[asyncio.Task[None]] = set()

    async def close(self) -> None:
        """Close every channel (calls still running on them end)."""
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def call(
        self,
        target: Target,
        method: str,
        params: dict[str, Any],
        *,
        request_id: Any,
        headers: Mapping[str, str],
        extensions: list[str] | None = None,
    ) -> dict[str, Any]:
        """One unary RPC; the agent's answer as a JSON-RPC response object (its error
        included). RpcError as the module docstring says."""
        rpc, request = self._request(target, method, params)
        channel = await self._channel(target)
        invoke = channel.unary_unary(
            f"/{SERVICE}/{rpc.name}",
            request_serializer=rpc.request.SerializeToString,
            response_deserializer=rpc.response.FromString,
        )
        timeout = self.owner.connect_timeout + self.owner.read_timeout
        retried = False
        while True:
            metadata = await self._metadata(target, headers)
            call = invoke(request, metadata=metadata, timeout=timeout)
            try:
                reply = await call
            except grpc.aio.AioRpcError as exc:
                if self._refused_token(target, exc, metadata, retried):
                    retried = True
                    continue
                error = self._agent_error(target, exc, delivered=False)
                if extensions is not None:
                    extensions.extend(_extensions(exc.initial_metadata()))
                return _response(request_id, "error", error)
            except (OSError, ValueError) as exc:  # e.g. metadata grpc will not send
                raise self._unreachable(target, f"the call failed ({exc})") from None
            if extensions is not None:
                extensions.extend(_extensions(await call.initial_metadata()))
            self._answered(target)
            return _response(request_id, "result", result_json(reply))

    async def stream(
        self,
        target: Target,
        method: str,
        params: dict[str, Any],
        *,
        request_id: Any,
        headers: Mapping[str, str],
        on_headers: Callable[[list[str], bool], None] | None = None,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """A server-streaming RPC: each message as a JSON-RPC response object as it arrives;
        an error status before the first one is yielded as the only item (``on_headers`` is
        then told it is not a stream), after it as the last. ``aclose()`` cancels the call."""
        rpc, request = self._request(target, method, params)
        channel = await self._channel(target)
        invoke = channel.unary_stream(
            f"/{SERVICE}/{rpc.name}",
            request_serializer=rpc.request.SerializeToString,
            response_deserializer=rpc.response.FromString,
        )
        first_wait = self.owner.connect_timeout + self.owner.read_timeout
        call: Any = None
        try:
            retried = False
            while True:
                metadata = await self._metadata(target, headers)
                call = invoke(request, metadata=metadata)
                try:
                    message = await asyncio.wait_for(call.read(), first_wait)
                except grpc.aio.AioRpcError as exc:
                    if self._refused_token(target, exc, metadata, retried):
                        retried = True
                        continue
                    error = self._agent_error(target, exc, delivered=False)
                    if on_headers is not None:
                        on_headers(_extensions(exc.initial_metadata()), False)
                    yield _response(request_id, "error", error)
                    return
                except TimeoutError:
                    raise self._unreachable(
                        target, f"no answer from the agent for {first_wait:g} s"
                    ) from None
                break
            if on_headers is not None:
                on_headers(_extensions(await call.initial_metadata()), True)
            self._answered(target)
            while message is not grpc.aio.EOF:
                yield _response(request_id, "result", result_json(message))
                try:
                    message = await asyncio.wait_for(call.read(), self.owner.read_timeout)
                except grpc.aio.AioRpcError as exc:
                    yield _response(request_id, "error", self._agent_error(target, exc, True))
                    return
                except TimeoutError:
                    reason = f"no data from the agent for {self.owner.read_timeout:g} s"
                    self._failed(target, reason)
                    raise self._failure(target, STREAM_FAILED, reason) from None
        finally:
            if call is not None and not call.done():
                call.cancel()

    # -- helpers -----------------------------------------------------------------------------

    def _request(self, target: Target, method: str, params: dict[str, Any]) -> tuple[Rpc, Any]:
        rpc = RPCS.get(method)
        if rpc is None:
            raise RpcError(
                UNSUPPORTED,
                f"Agent {target.agent_id} is reached over gRPC, which has no RPC for {method}",
                {"agent": target.agent_id, "method": method, "binding": GRPC},
            )
        try:
            return rpc, request_message(rpc, params)
        except (json_format.ParseError, TypeError, ValueError) as exc:
            name = rpc.request.DESCRIPTOR.full_name
            reason = f"the params do not fit the agent's gRPC request {name}: {exc}"
            data = self._failure(target, INVALID_PARAMS, reason).data
            raise RpcError(INVALID_PARAMS, f"Invalid params: {reason}", data) from None

    async def _channel(self, target: Target) -> grpc.aio.Channel:
        channel = self._channels.get(target.url)
        if channel is not None:
            return channel
        try:
            where = grpc_address(target.url)
        except ValueError as exc:
            raise self._failure(target, AGENT_UNAVAILABLE, str(exc)) from None
        connect = target_of(where)
        policy, proxy = self.owner.policy, self.owner.proxy
        if proxy is not None and proxy.via(where.url()) is not None:
            return await self._proxied_channel(target, where, proxy)
        if policy is not None:
            try:
                policy.check_url(where.url())
                found = await GuardedResolver(policy).resolve(
                    where.host, where.port, socket.AF_UNSPEC
                )
            except RegistryError as exc:
                raise self._failure(target, AGENT_UNAVAILABLE, exc.message) from None
            except OSError:
                raise self._unreachable(target, f"cannot resolve {where.host}") from None
            ip = str(found[0]["host"])
            connect = f"ipv6:[{ip}]:{where.port}" if ":" in ip else f"ipv4:{ip}:{where.port}"
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", self.owner.max_body_bytes),
            ("grpc.primary_user_agent", self.owner.user_agent),
            ("grpc.enable_http_proxy", 0),
            ("grpc.default_authority", target_of(where)),
        ]
        return await self._keep(target, where, connect, options)

    async def _proxied_channel(
        self, target: Target, where: Address, proxy: OutboundProxy
    ) -> grpc.aio.Channel:
        """A channel through the outbound proxy: grpcio's own HTTP CONNECT (``grpc.http_proxy``,
        the credentials in its URL) to the agent's name, once the guard accepted every
        address of it."""
        if proxy.tls:
            reason = (
                f"gRPC cannot go through the https:// outbound proxy {proxy.shown} (grpcio speaks "
                "plain HTTP to a proxy): list the agent in SWITCHBOARD_OUTBOUND_NO_PROXY, or use "
                "an http:// proxy"
            )
            raise self._failure(target, AGENT_UNAVAILABLE, reason)
        policy = self.owner.policy
        if policy is not None:
            try:
                policy.check_url(where.url())
                await check_host(policy, where.host, where.port)
            except RegistryError as exc:
                raise self._failure(target, AGENT_UNAVAILABLE, exc.message) from None
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", self.owner.max_body_bytes),
            ("grpc.primary_user_agent", self.owner.user_agent),
            ("grpc.enable_http_proxy", 1),
            ("grpc.http_proxy", proxy.with_credentials()),
        ]
        return await self._keep(target, where, f"dns:///{target_of(where)}", options)

    async def _keep(
        self, target: Target, where: Address, connect: str, options: list[tuple[str, Any]]
    ) -> grpc.aio.Channel:
        """A channel to ``connect``, kept for the agent's URL (the first one made wins)."""
        if where.tls:
            options.append(("grpc.ssl_target_name_override", where.host))
            channel = grpc.aio.secure_channel(connect, grpc.ssl_channel_credentials(), options)
        else:
            channel = grpc.aio.insecure_channel(connect, options)
        if target.url in self._channels:  # another call made one meanwhile
            await channel.close()
            return self._channels[target.url]
        self._channels[target.url] = channel
        return channel

    def _drop(self, target: Target) -> None:
        """Forget the agent's channel (the next call connects anew); calls on it may finish."""
        channel = self._channels.pop(target.url, None)
        if channel is not None:
            task = asyncio.create_task(channel.close(grace=self.owner.read_timeout))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _metadata(
        self, target: Target, headers: Mapping[str, str]
    ) -> tuple[tuple[str, str], ...]:
        sent = await self._headers(target, headers, "application/grpc")
        out: list[tuple[str, str]] = []
        for name, value in sent.items():
            key = name.lower()
            if key in _SKIPPED or key.endswith("-bin") or not _KEY.fullmatch(key):
                continue
            if value.isascii() and value.isprintable():
                out.append((key, value))
        return tuple(out)

    def _refused_token(
        self,
        target: Target,
        exc: grpc.aio.AioRpcError,
        metadata: tuple[tuple[str, str], ...],
        retried: bool,
    ) -> bool:
        """``UNAUTHENTICATED`` to the first try with an OAuth2 token: ask again once."""
        auth = self.owner.auth
        if retried or auth is None or exc.code() != grpc.StatusCode.UNAUTHENTICATED:
            return False
        return auth.invalidate(target.agent_id, dict(metadata).get("authorization"))

    def _agent_error(
        self, target: Target, exc: grpc.aio.AioRpcError, delivered: bool
    ) -> dict[str, Any]:
        """The agent's error status as a JSON-RPC error object; raises RpcError for a
        status saying the call did not get through (-32052, or -32053 once ``delivered``)."""
        code, message = exc.code(), exc.details() or ""
        details = _details_bin(exc.trailing_metadata())
        own_limit = details is None and "larger than max" in message
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED and own_limit:  # our receive limit
            reason = f"the answer exceeds {self.owner.max_body_bytes} bytes"
            raise self._failure(target, INVALID_AGENT_RESPONSE, reason)
        error = status_error(code, message, details)
        if error is not None:
            self._answered(target)
            return error
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            reason = f"gRPC {code.name}: {_REFUSED}"
            self._answered(target)
        elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
            timeout = self.owner.connect_timeout + self.owner.read_timeout
            reason = f"no answer from the agent within {timeout:g} s"
        else:
            reason = f"gRPC {code.name}: {message}" if message else f"gRPC {code.name}"
            if code == grpc.StatusCode.UNAVAILABLE:
                self._drop(target)
        if delivered:
            self._failed(target, reason)
            raise self._failure(target, STREAM_FAILED, reason)
        raise self._unreachable(target, reason)

    def _unreachable(self, target: Target, reason: str) -> RpcError:
        self._failed(target, reason)
        return self._failure(target, AGENT_UNAVAILABLE, reason)

    def _failed(self, target: Target, reason: str) -> None:
        if self.owner.health is not None:
            self.owner.health.failed(target.agent_id, reason)

    def _answered(self, target: Target) -> None:
        if self.owner.health is not None:
            self.owner.health.answered(target.agent_id)


def target_of(where: Address) -> str:
    """``host:port`` (an IPv6 host in brackets)."""
    host = f"[{where.host}]" if ":" in where.host else where.host
    return f"{host}:{where.port}"


def _response(request_id: Any, member: str, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, member: value}


def _details_bin(metadata: Any) -> bytes | None:
    for key, value in metadata or ():
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            return value
    return None


def _extensions(metadata: Any) -> list[str]:
    if metadata is None or metadata is grpc.aio.EOF:
        return []
    with contextlib.suppress(TypeError, ValueError):
        return reply_extensions(CIMultiDict((k, v) for k, v in metadata if isinstance(v, str)))
    return []
