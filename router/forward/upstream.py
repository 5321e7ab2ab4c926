"""Forwarding JSON-RPC calls and streams to agents over pooled HTTP/1.1 connections (the
lean client of :mod:`router.forward.h1client` for JSON-RPC interfaces, aiohttp's otherwise), in
the binding of the target's interface: JSON-RPC, or HTTP+JSON converted at the edge
(:mod:`router.forward.upstream_rest`), so answers are JSON-RPC response objects either way;
gRPC agents through :mod:`router.forward.upstream_grpc` (imported only then: it needs the
``grpc`` extra; without it such a call is -32052 saying to install it).

:class:`Upstream` owns the client pools (per-host and total connection limits, no cookie
jar, no proxy variables from the environment, redirects not followed). Failures become
:class:`~router.protocol.envelope.RpcError` with ``data = {"agent", "url", "reason"}`` (strings, no
stack traces):

* ``AGENT_UNAVAILABLE`` (-32052): connection refused/reset, TLS or DNS failure, refused
  address, connect or read timeout, an answer that is not JSON (HTML error pages, empty
  bodies), a redirect, a 5xx whose body is not a JSON-RPC response; for streams, any of these
  before the first event.
* ``STREAM_FAILED`` (-32053): the connection broke or went silent for ``read_timeout`` after
  at least one event was delivered.
* ``INVALID_AGENT_RESPONSE`` (-32006): JSON that is not a JSON-RPC response object (or too
  deep/too large, or holding NaN/Infinity or a number beyond a double's range such as
  ``1e400``), an SSE event whose data is not a JSON-RPC response, an oversized SSE line.

A JSON-RPC error answered by the agent is not an exception: it is returned (``call``) or
yielded (``stream``) as the agent's response object, whatever the HTTP status.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any, Protocol

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from registry.egress import OutboundProxy
from registry.errors import RegistryError
from registry.netguard import AddressPolicy, redact_url
from router.choose.choice import GRPC, Target
from router.forward.aiohttpclient import agent_session, answer_head, coding_problem, releasing
from router.forward.answers import NotJson, Unacceptable, is_response, parse_answer
from router.forward.call import Frames
from router.forward.credentials import OutboundAuth
from router.forward.fastrelay import RawAnswer, unparsed
from router.forward.h1client import H1Pool, H1Response, TooLarge
from router.forward.headers import (
    CLIENT_HEADERS,
    EXTENSIONS_HEADER,
    FORWARDED_HEADERS,
    FRAMING_HEADERS,
    ForwardedHeaders,
    forward_headers,
    reply_extensions,
)
from router.forward.sse import SseError, SseEvent, SseParser
from router.forward.upstream_rest import Leg, leg
from router.forward.wirereasons import wire_reason
from router.observe.metrics import observed_call, observed_stream
from router.protocol.errors import (
    AGENT_UNAVAILABLE,
    INVALID_AGENT_RESPONSE,
    STREAM_FAILED,
    RpcError,
)
from router.tracing import spans

__all__ = [
    "CLIENT_HEADERS",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_DEPTH",
    "EXTENSIONS_HEADER",
    "FORWARDED_HEADERS",
    "ForwardedHeaders",
    "OutboundAuth",
    "Target",
    "Upstream",
    "forward_headers",
    "reply_extensions",
]

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_DEPTH = 64

_TRANSPORT_ERRORS = (aiohttp.ClientError, TimeoutError, OSError, RegistryError)
_REFUSED = "the agent refused the call: it needs an outbound credential, or another one"
_SWITCHED = "malformed HTTP answer (a protocol switch, not asked for)"


class HealthObserver(Protocol):
    """Told about each agent's answers (see ``registry.refresh.PassiveHealth``)."""

    def failed(self, agent_id: str, reason: str) -> None:
        """The agent could not be reached, or answered 5xx."""

    def answered(self, agent_id: str) -> None:
        """The agent answered below 500."""


class Upstream:
    """The router's HTTP client for agents: JSON-RPC calls (:meth:`call`) and SSE streams
    (:meth:`stream`), each over its own pool (calls bounded per agent and in all, streams by
    ``stream_limit``).

    ``connect_timeout`` bounds establishing a connection; ``pool_timeout`` (default
    ``read_timeout``) is the extra time a request may wait for a free pooled connection when
    the per-agent or total limit is reached (aiohttp bounds both together). ``read_timeout``
    bounds every silence while waiting for the response headers, a call's body, or the next
    bytes of a stream (never a whole stream). With a ``policy`` the agent URL is checked and
    DNS answers filtered (SSRF guard, as in the crawler). With a ``proxy`` every agent that
    ``SWITCHBOARD_OUTBOUND_NO_PROXY`` does not list is reached through it, on every binding
    (the guard judges the agent's host first).

    With :attr:`auth` set, every call carries the agent's outbound credential, or the
    client's ``Authorization`` for an agent configured with ``forward_client_auth`` (no other
    client ``Authorization`` ever leaves); an agent that answers 401 to an OAuth2 token is
    asked once more with a fresh token. JSON-RPC calls and streams go over
    :mod:`router.forward.h1client` (the same limits, timeouts and guard) unless ``lean_calls``
    is False; HTTP+JSON interfaces over aiohttp's client.
    """

    def __init__(
        self,
        *,
        connect_timeout: float,
        read_timeout: float,
        per_agent_limit: int = 100,
        total_limit: int = 1000,
        stream_limit: int = 0,
        pool_timeout: float | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        policy: AddressPolicy | None = None,
        user_agent: str = "Switchboard",
        lean_calls: bool = True,
        proxy: OutboundProxy | None = None,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.per_agent_limit = per_agent_limit
        self.total_limit = total_limit
        self.stream_limit = stream_limit
        self.pool_timeout = read_timeout if pool_timeout is None else pool_timeout
        self.max_body_bytes = max_body_bytes
        self.max_depth = max_depth
        self.policy = policy
        self.user_agent = user_agent
        self.proxy = proxy
        self.health: HealthObserver | None = None  # passive health reports, if set
        self.auth: OutboundAuth | None = None  # outbound credentials, if set
        self._session: aiohttp.ClientSession | None = None
        self._streams: aiohttp.ClientSession | None = None
        self._grpc: Any = None  # the gRPC edge (router.forward.upstream_grpc), once needed
        self.lean_calls = lean_calls  # JSON-RPC calls and streams on router.forward.h1client
        self._h1: H1Pool | None = None
        self._h1s: H1Pool | None = None  # the lean client's streams (their own limit)
        self._checked: dict[str, URL] = {}  # agent URLs the policy accepted

    async def start(self) -> None:
        """Create the sessions (idempotent): one for calls, with the per-agent and total
        connection limits; one for streams, which hold their connection for as long as they
        last and are bounded by ``stream_limit`` (the router's stream limit) instead."""
        if self._session is not None and not self._session.closed:
            return
        self._session = self._new_session(self.total_limit, self.per_agent_limit)
        self._streams = self._new_session(self.stream_limit, 0)
        if self.lean_calls:
            self._h1 = H1Pool(
                connect_timeout=self.connect_timeout, read_timeout=self.read_timeout,
                pool_timeout=self.pool_timeout, per_origin_limit=self.per_agent_limit,
                total_limit=self.total_limit, max_body_bytes=self.max_body_bytes,
                policy=self.policy, user_agent=self.user_agent, proxy=self.proxy,
            )  # fmt: skip
            self._h1s = H1Pool(
                connect_timeout=self.connect_timeout, read_timeout=self.read_timeout,
                pool_timeout=self.pool_timeout, per_origin_limit=0,
                total_limit=self.stream_limit, max_body_bytes=self.max_body_bytes,
                policy=self.policy, user_agent=self.user_agent, proxy=self.proxy,
            )  # fmt: skip
        if self.auth is not None:
            await self.auth.start()

    def _new_session(self, limit: int, per_host: int) -> aiohttp.ClientSession:
        return agent_session(
            limit, per_host, connect_timeout=self.connect_timeout,
            pool_timeout=self.pool_timeout, read_timeout=self.read_timeout,
            policy=self.policy, proxy=self.proxy, user_agent=self.user_agent,
        )  # fmt: skip

    async def _head(
        self, session: aiohttp.ClientSession, out: Leg, sent: CIMultiDict[str]
    ) -> aiohttp.ClientResponse:
        """aiohttp's answer to ``out``, its head whole in time (:func:`answer_head`)."""
        waits = self.connect_timeout + self.pool_timeout
        return await answer_head(
            session, out.verb, out.url, out.body, sent, waits=waits, read_timeout=self.read_timeout
        )

    async def close(self) -> None:
        """Close the sessions and every pooled connection (and :attr:`auth`'s)."""
        for session in (self._session, self._streams):
            if session is not None:
                await session.close()
        self._session = self._streams = None
        for pool in (self._h1, self._h1s):
            if pool is not None:
                await pool.close()
        self._h1 = self._h1s = None
        if self._grpc is not None:
            await self._grpc.close()
            self._grpc = None
        if self.auth is not None:
            await self.auth.close()

    async def __aenter__(self) -> Upstream:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- calls -------------------------------------------------------------------------------

    @observed_call
    @spans.traced_call
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
        """Send one request (JSON-RPC, or its HTTP+JSON path); return the agent's response
        object (``result`` or ``error``). Raises RpcError (-32052, -32006) as described in
        the module docstring; -32004 for a method the agent's HTTP+JSON binding has no path for.
        ``extensions`` (if given) receives the extensions the agent's answer says it
        activated (its ``A2A-Extensions``/``X-A2A-Extensions`` headers)."""
        session = self._require_session()
        if target.binding == GRPC:
            ext = extensions
            return await self._grpc_edge(target).call(
                target, method, params, request_id=request_id, headers=headers, extensions=ext
            )
        out, retried = self._leg(target, method, params, request_id), False
        while True:
            sent = await self._headers(target, headers, "application/json")
            try:
                if self._h1 is not None and out.rest is None and out.body is not None:
                    answer = await self._h1.post(out.url, sent.items(), out.body)
                    if self._refused_token(target, answer, sent, retried):
                        retried = True
                        continue
                    if extensions is not None:
                        extensions.extend(reply_extensions(answer.headers))
                    return self._response_object(target, answer, answer.body, out)
                async with await self._head(session, out, sent) as resp:
                    if self._refused_token(target, resp, sent, retried):
                        retried = True
                        continue
                    if extensions is not None:
                        extensions.extend(reply_extensions(resp.headers))
                    if (problem := coding_problem(resp.headers)) is not None:
                        raise self._error(target, AGENT_UNAVAILABLE, problem)
                    raw = await self._read_all(target, resp.headers, resp.content.readany)
                    return self._response_object(target, resp, raw, out)
            except TooLarge:
                raise self._too_large(target) from None
            except _TRANSPORT_ERRORS as exc:
                raise self._unreachable(target, exc) from None

    @observed_stream
    @spans.traced_stream
    async def stream(
        self,
        target: Target,
        method: str,
        params: dict[str, Any],
        *,
        request_id: Any,
        headers: Mapping[str, str],
        on_headers: Callable[[list[str], bool], None] | None = None,
        quick: Callable[[str], bytes | None] | None = None,
    ) -> AsyncGenerator[dict[str, Any] | Frames, None]:
        """POST a streaming JSON-RPC request; yield each SSE event's JSON-RPC object as soon as
        its blank line arrives (a last event cut short by EOF included; from a JSON-RPC
        interface a :class:`~router.forward.fastrelay.RawAnswer`, its data kept). With
        ``quick`` (JSON-RPC interfaces), an event whose data ``quick`` turns into bytes is not
        parsed: the events so relayed in a row come as one :class:`Frames`. A plain JSON
        answer (typically a JSON-RPC error) is yielded as the only item. The generator ends when the
        agent ends the stream; ``aclose()`` closes the agent connection at once.
        Raises RpcError (-32052 before the first event, -32053 after, -32006 for bad data).
        ``on_headers`` (if given) is called once the agent's response headers are in, with
        the extensions they say the agent activated and whether the answer is a stream (False:
        the one plain JSON answer follows).
        """
        session = self._require_session(streams=True)
        if target.binding == GRPC:
            hook = on_headers
            events = self._grpc_edge(target).stream(
                target, method, params, request_id=request_id, headers=headers, on_headers=hook
            )
            async with contextlib.aclosing(events):
                async for event in events:
                    yield event
            return
        out, retried = self._leg(target, method, params, request_id), False
        del params  # sent as out.body: not held while the stream lasts
        lean = self._h1s is not None and out.rest is None and out.body is not None
        head: aiohttp.ClientResponse | H1Response | None = None
        read: Callable[[], Awaitable[bytes]] | None = None
        done: Callable[[bool], None] = _kept
        finished = False
        try:
            while head is None:
                sent = await self._headers(target, headers, "text/event-stream, application/json")
                try:
                    if lean:
                        head, body = await self._h1s.stream(out.url, sent.items(), out.body)  # type: ignore[union-attr,arg-type]
                        read, done = body.read, body.close
                    else:
                        resp = await self._head(session, out, sent)
                        head, read, done = resp, resp.content.readany, releasing(resp)
                        del resp
                        if (problem := coding_problem(head.headers)) is not None:
                            done(False)
                            raise self._error(target, AGENT_UNAVAILABLE, problem)
                except _TRANSPORT_ERRORS as exc:
                    raise self._unreachable(target, exc) from None
                if self._refused_token(target, head, sent, retried):
                    done(False)
                    head, done, retried = None, _kept, True
            del sent, headers  # not held while the stream lasts
            assert read is not None
            out = out.sent()  # the request's bytes are not held while the stream lasts
            streamed = 200 <= head.status < 300 and media_type(head.headers) == "text/event-stream"
            if on_headers is not None:
                on_headers(reply_extensions(head.headers), streamed)

            if not streamed:
                try:
                    raw = await self._read_all(target, head.headers, read)
                except _TRANSPORT_ERRORS as exc:
                    raise self._unreachable(target, exc) from None
                finished = True
                yield self._response_object(target, head, raw, out)
                return

            head = None  # nothing of the answer's head is held while the stream lasts
            parser = SseParser(
                max_line_bytes=self.max_body_bytes, max_event_bytes=self.max_body_bytes
            )
            if self.health is not None:
                self.health.answered(target.agent_id)
            delivered = False
            if out.rest is not None or out.stand_in:
                quick = None
            while True:
                try:
                    chunk = await read()
                except _TRANSPORT_ERRORS as exc:
                    if not delivered:
                        raise self._unreachable(target, exc) from None
                    if self.health is not None:
                        self.health.failed(target.agent_id, self._reason(exc))
                    raise self._error(target, STREAM_FAILED, self._reason(exc)) from None
                failure: SseError | None = None
                try:
                    events = parser.feed_data(chunk) if chunk else parser.feed_eof()
                except SseError as exc:
                    events, failure = exc.events, exc  # type: ignore[assignment]
                for event in unparsed(events, quick):  # type: ignore[arg-type]
                    delivered = True
                    yield event if type(event) is Frames else self._event_object(target, event, out)
                events = event = None  # nothing of the last events held while the agent is silent
                if failure is not None:
                    raise self._error(target, INVALID_AGENT_RESPONSE, str(failure))
                if not chunk:
                    finished = True
                    return
        finally:
            done(finished)

    # -- helpers -----------------------------------------------------------------------------

    def _grpc_edge(self, target: Target) -> Any:
        if self._grpc is None:
            try:
                from router.forward.upstream_grpc import GrpcEdge
            except ImportError:
                raise self._error(
                    target,
                    AGENT_UNAVAILABLE,
                    "the agent is reached only over gRPC: install a2a-switchboard[grpc]",
                ) from None
            self._grpc = GrpcEdge(self, self._headers, self._error)
        return self._grpc

    def _require_session(self, *, streams: bool = False) -> aiohttp.ClientSession:
        session = self._streams if streams else self._session
        if session is None or session.closed:
            raise RuntimeError("Upstream.start() has not been called")
        return session

    def _leg(self, target: Target, method: str, params: dict[str, Any], request_id: Any) -> Leg:
        url = self._check_url(target)
        try:
            return leg(target, url, method, params, request_id)
        except RpcError as exc:  # no path for the method in the agent's binding
            data = self._error(target, exc.code, exc.message).data
            raise RpcError(exc.code, exc.message, data) from None

    def _check_url(self, target: Target) -> URL:
        if (checked := self._checked.get(target.url)) is not None:
            return checked  # the policy's answer for a URL does not change
        if self.policy is not None:
            try:
                checked = self.policy.check_url(target.url)
            except RegistryError as exc:
                raise self._error(target, AGENT_UNAVAILABLE, exc.message) from None
            if len(self._checked) >= 4096:
                self._checked.clear()
            self._checked[target.url] = checked
            return checked
        try:
            url = URL(target.url)
        except (ValueError, TypeError):
            raise self._error(target, AGENT_UNAVAILABLE, "the URL cannot be parsed") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise self._error(target, AGENT_UNAVAILABLE, "only http(s) URLs with a host work")
        return url

    async def _headers(
        self, target: Target, headers: Mapping[str, str], accept: str
    ) -> CIMultiDict[str]:
        out: CIMultiDict[str] = CIMultiDict()
        for name, value in headers.items():
            if name.lower() not in FRAMING_HEADERS:
                out.add(name, value)
        if self.auth is not None:
            if self.auth.forwards_client_auth(target.agent_id):
                client = getattr(headers, "client_authorization", None)
                if client:
                    out["Authorization"] = client
            else:
                try:
                    out.update(await self.auth.headers(target.agent_id))
                except RpcError as exc:  # no usable credential: say so in this module's shape
                    reason = exc.data.get("reason", exc.message) if exc.data else exc.message
                    raise self._error(target, exc.code, reason) from None
        out["Content-Type"] = "application/json"
        out["Accept"] = accept
        if target.version == "1.0":
            out["A2A-Version"] = "1.0"
        spans.inject(out)  # the agent continues the router's client span (traceparent)
        return out

    def _refused_token(
        self,
        target: Target,
        resp: aiohttp.ClientResponse | H1Response,
        sent: CIMultiDict[str],
        retried: bool,
    ) -> bool:
        """A 401 to the first try with an OAuth2 token: drop the token (ask again once)."""
        if retried or resp.status != 401 or self.auth is None:
            return False
        return self.auth.invalidate(target.agent_id, sent.get("Authorization"))

    async def _read_all(
        self, target: Target, headers: Mapping[str, str], read: Callable[[], Awaitable[bytes]]
    ) -> bytes:
        """A whole answer's body, within ``max_body_bytes`` (-32006 beyond)."""
        length = headers.get("Content-Length", "")
        if length.isdigit() and int(length) > self.max_body_bytes:
            raise self._too_large(target)
        body = bytearray()
        while chunk := await read():
            body += chunk
            if len(body) > self.max_body_bytes:
                raise self._too_large(target)
        return bytes(body)

    def _too_large(self, target: Target) -> RpcError:
        return self._error(
            target, INVALID_AGENT_RESPONSE, f"the answer exceeds {self.max_body_bytes} bytes"
        )

    def _unreachable(self, target: Target, exc: BaseException) -> RpcError:
        """-32052 for an agent that cannot be reached; reported to passive health."""
        reason = self._reason(exc)
        if self.health is not None:
            self.health.failed(target.agent_id, reason)
        return self._error(target, AGENT_UNAVAILABLE, reason)

    def _response_object(
        self, target: Target, resp: aiohttp.ClientResponse | H1Response, raw: bytes, out: Leg
    ) -> dict[str, Any]:
        status = f"HTTP {resp.status} {resp.reason or ''}".rstrip()
        if resp.status == 101:  # aiohttp hands a protocol switch over (the lean client refuses it)
            raise self._error(target, AGENT_UNAVAILABLE, _SWITCHED)
        if resp.status == 407 and self.proxy is not None:
            raise self._error(target, AGENT_UNAVAILABLE, f"{status}: the outbound proxy refused it")
        if self.health is not None:
            if resp.status >= 500:
                self.health.failed(target.agent_id, status)
            else:
                self.health.answered(target.agent_id)
        if 300 <= resp.status < 400:
            where = resp.headers.get("Location", "")
            shown = f" to {redact_url(where)}" if where else ""
            raise self._error(
                target,
                AGENT_UNAVAILABLE,
                f"{status}: redirected{shown}; redirects are not followed",
            )
        try:
            obj: Any = parse_answer(raw, self.max_depth)
        except (NotJson, Unacceptable) as exc:
            obj = None if out.rest and resp.status < 300 and not raw.strip() else exc
        obj = out.answer(resp.status, obj)
        if is_response(obj):
            return obj
        if resp.status in (401, 403):  # not a JSON-RPC error: the HTTP layer refused the call
            raise self._error(target, AGENT_UNAVAILABLE, f"{status}: {_REFUSED}")
        if isinstance(obj, NotJson):
            raise self._error(target, AGENT_UNAVAILABLE, f"{status}: {obj}")
        if isinstance(obj, Unacceptable):
            raise self._error(target, INVALID_AGENT_RESPONSE, f"{status}: {obj}")
        if resp.status >= 500:
            raise self._error(target, AGENT_UNAVAILABLE, f"{status} without a JSON-RPC answer")
        raise self._error(
            target, INVALID_AGENT_RESPONSE, f"{status}: the JSON answer is not a JSON-RPC response"
        )

    def _event_object(self, target: Target, event: SseEvent, out: Leg) -> dict[str, Any]:
        try:
            parsed = parse_answer(event.data, self.max_depth)
            obj = out.event(event.event, parsed)
        except (NotJson, Unacceptable) as exc:
            raise self._error(
                target, INVALID_AGENT_RESPONSE, f"an {event.event!r} event: {exc}"
            ) from None
        if not is_response(obj):
            raise self._error(
                target,
                INVALID_AGENT_RESPONSE,
                f"an {event.event!r} event's data is not a JSON-RPC response",
            )
        return RawAnswer(obj, event.data) if obj is parsed else obj  # its bytes, for relaying

    def _error(self, target: Target, code: int, reason: str) -> RpcError:
        messages = {
            AGENT_UNAVAILABLE: f"Agent {target.agent_id} is unavailable",
            STREAM_FAILED: f"The stream from agent {target.agent_id} failed",
            INVALID_AGENT_RESPONSE: f"Agent {target.agent_id} sent an invalid response",
        }
        data = {"agent": target.agent_id, "url": redact_url(target.url), "reason": reason}
        return RpcError(code, messages.get(code, "Upstream error"), data)

    def _reason(self, exc: BaseException) -> str:
        """One line saying what went wrong on the wire (no traceback, no exception repr)."""
        return wire_reason(
            exc,
            connect_timeout=self.connect_timeout,
            pool_timeout=self.pool_timeout,
            read_timeout=self.read_timeout,
        )


def media_type(headers: Mapping[str, str]) -> str:
    """An answer's media type, lowercased, without parameters ("" without Content-Type)."""
    return headers.get("Content-Type", "").partition(";")[0].strip().lower()


def _kept(finished: bool) -> None:
    """Nothing to release (no answer yet)."""
