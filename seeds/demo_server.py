"""A small, real A2A JSON-RPC server for the demo agents, speaking 0.3, 1.0, or both.

A :class:`DemoAgent` serves its card at the well-known path(s) and JSON-RPC at ``POST /``.
The skill itself is a plain ``reply(text, parts)`` function returning a :class:`ReplyResult`;
this module owns the rest: SSE streaming, multi-turn ``input-required`` tasks, non-blocking
sends, cancel, get, subscribe and list. The card is signed (A2A card signatures: a JWS over
its RFC 8785 form, with ``kid`` and ``jku``) by a P-256 key made when the agent is created
and kept in memory only; the public key is served at :data:`JWKS_PATH`. The wire shapes live
in :mod:`seeds.demo_wire` and :mod:`seeds.demo_compat`, request parsing in
:mod:`seeds.demo_rpc`, the task model in :mod:`seeds.demo_model`, the in-memory task store in
:mod:`seeds.demo_tasks`.

An agent serving both versions does it as an a2a-sdk 1.3 server in 0.3-compatibility mode:
one URL; the method name picks the version (their names differ) and ``A2A-Version`` is then
checked against it (missing or empty means 0.3); 0.3 is answered in the shapes of
:class:`~seeds.demo_compat.Wire03Compat`; one task store serves both, so a task started over
1.0 can be read, continued or followed over 0.3 and the other way round.

Parts reach ``reply`` in one version-neutral shape:
``{"kind": "text", "text": str}``, ``{"kind": "data", "data": Any}`` or
``{"kind": "file", "bytes": bytes | None, "uri": str | None, "media_type": str | None,
"filename": str | None}``; each may also carry ``"metadata"``.

Hand-written on aiohttp on purpose: the a2a-sdk is only a test peer.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
import math
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from operator import methodcaller
from typing import Any, Literal, TypeAlias

from aiohttp import web
from jwcrypto.jwk import JWK

from registry.jwkeys import generate_key, public_jwks
from registry.signatures import sign_card
from router.signing import CardSigner
from seeds.demo_compat import COMPAT_WIRE
from seeds.demo_model import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    Artifact,
    Events,
    Message,
    Part,
    RpcError,
    Task,
)
from seeds.demo_rpc import SendCall, parse_call, read_payload, request_id, select_wire
from seeds.demo_tasks import TaskStore
from seeds.demo_wire import WIRES, Wire

__all__ = [
    "JWKS_PATH",
    "CardFactory",
    "DemoAgent",
    "Part",
    "ReplyFunction",
    "ReplyResult",
    "RpcError",
    "Version",
]

log = logging.getLogger(__name__)

Version: TypeAlias = Literal["0.3", "1.0"]
CardFactory = Callable[[str], dict[str, Any]]
ReplyFunction = Callable[[str, list[Part]], "ReplyResult | Awaitable[ReplyResult]"]

MAX_REQUEST_BYTES = 8 * 1024 * 1024
#: Where each agent publishes the public half of its card signing key.
JWKS_PATH = "/.well-known/jwks.json"
#: The 0.3 fields an a2a-sdk 1.3 server appends to a 1.0 card in 0.3-compat mode.
COMPAT_TAIL = ("preferredTransport", "protocolVersion", "url")
ARTIFACT_CHUNKS = 3
SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-store",
    "X-Accel-Buffering": "no",
}


@dataclass(frozen=True)
class ReplyResult:
    """A skill's answer: text (plus optional JSON data), or a question back to the user."""

    text: str
    data: dict[str, Any] | None = None
    input_required: bool = False

    @classmethod
    def ask(cls, question: str) -> ReplyResult:
        """Leave the task in ``input-required``, with ``question`` as its status message."""
        return cls(text=question, input_required=True)


# --- small helpers -------------------------------------------------------------------------------


def _accepts(accepted: list[str] | None, media_type: str) -> bool:
    if not accepted:
        return True
    major = media_type.split("/", 1)[0]
    return any(m in ("*/*", "*", media_type, f"{major}/*") for m in accepted)


def _split_text(text: str, pieces: int) -> list[str]:
    """Split ``text`` at whitespace into at most ``pieces`` chunks that join back to it."""
    tokens = re.findall(r"\s*\S+\s*", text) or [text]
    size = math.ceil(len(tokens) / min(pieces, len(tokens)))
    return ["".join(tokens[i : i + size]) for i in range(0, len(tokens), size)]


def _etag_matches(header: str, etag: str) -> bool:
    candidates = [c.strip().removeprefix("W/") for c in header.split(",")]
    return "*" in candidates or etag.removeprefix("W/") in candidates


def _wires(versions: Sequence[str]) -> tuple[Wire, ...]:
    if not versions or len(set(versions)) != len(versions) or not set(versions) <= WIRES.keys():
        raise ValueError(f"unsupported A2A versions {versions!r}; use '0.3', '1.0' or both")
    both = len(versions) > 1
    return tuple(COMPAT_WIRE if both and v == "0.3" else WIRES[v] for v in versions)


def _signed(card: dict[str, Any], key: JWK, jku: str) -> dict[str, Any]:
    """``card`` signed by ``key`` over its whole RFC 8785 form (nothing left uncovered), a 1.0
    card also over the a2a-sdk 1.x form that 1.x SDK verifiers check; ``signatures`` placed
    where a 1.3 server puts it, before the 0.3-compat fields."""
    signed = sign_card(card, key, jku=jku)
    if "supportedInterfaces" not in signed:
        return signed
    signed["signatures"] += CardSigner(key, jku).resign(card)["signatures"]
    tail = [k for k in COMPAT_TAIL if k in signed]
    return {**{k: v for k, v in signed.items() if k not in tail}, **{k: signed[k] for k in tail}}


def _url_host(host: str) -> str:
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


# --- the agent -----------------------------------------------------------------------------------


class DemoAgent:
    """One A2A agent: a card, a reply function, and the JSON-RPC/SSE server around them.

    ``versions`` is ``"0.3"``, ``"1.0"`` or both (``("1.0", "0.3")``: 1.0 with 0.3 compat,
    as a2a-sdk 1.3 serves it); the first is the agent's main version (:attr:`version`), whose
    format errors outside any method (bad JSON, unknown method) take.
    ``card(base_url)`` builds the card once the agent knows where it is bound; it should list
    every version served; it is served signed by :attr:`key` (``jku``: ``base_url`` +
    :data:`JWKS_PATH`, where the public key is served). Every answer streams as: task
    (submitted), status working, ``ARTIFACT_CHUNKS`` artifact chunks (plus a data chunk),
    status completed; ``chunk_delay`` seconds pass before each step.
    """

    def __init__(
        self,
        name: str,
        versions: Version | Sequence[Version],
        card: CardFactory,
        reply: ReplyFunction,
        *,
        chunk_delay: float = 0.0,
        working_text: str = "Working on it...",
        card_max_age: int = 300,
        max_tasks: int = 1000,
    ) -> None:
        self.versions: tuple[Version, ...] = (
            (versions,) if isinstance(versions, str) else tuple(versions)
        )
        self._wires = _wires(self.versions)
        self.name = name
        self.card = card
        self.reply = reply
        self.chunk_delay = chunk_delay
        self.working_text = working_text
        self.card_max_age = card_max_age
        self.base_url: str | None = None
        self.tasks = TaskStore(max_tasks)  # one store for every version served
        self.key = generate_key("ES256")  # fresh for each agent, in memory only
        self.key["kid"] = f"{name}-{self.key.thumbprint()[:12]}"
        self._runner: web.AppRunner | None = None
        self._card_cache: tuple[str, bytes, str] | None = None

    @property
    def version(self) -> Version:
        """The main protocol version (the first of :attr:`versions`)."""
        return self.versions[0]

    # lifecycle

    def make_app(self) -> web.Application:
        """The aiohttp application: card route(s) and JSON-RPC at ``POST /``."""
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_get("/.well-known/agent-card.json", self._serve_card)
        app.router.add_get(JWKS_PATH, self._serve_jwks)
        if self.versions == ("0.3",):  # the 0.3 SDK's legacy path; 1.3 has only the new one
            app.router.add_get("/.well-known/agent.json", self._serve_card)
        app.router.add_post("/", self._serve_rpc)
        app.on_shutdown.append(self._on_shutdown)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Bind and serve (``port=0`` picks a free port); return the base URL."""
        runner = web.AppRunner(self.make_app(), access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.base_url = f"http://{_url_host(host)}:{runner.addresses[0][1]}"
        return self.base_url

    async def close(self) -> None:
        """Stop serving: end open streams, cancel running tasks, close the listener."""
        await self._on_shutdown(None)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _on_shutdown(self, _app: web.Application | None) -> None:
        await self.tasks.shutdown()

    # card

    def _card_body(self, base_url: str) -> tuple[bytes, str]:
        if self._card_cache is None or self._card_cache[0] != base_url:
            card = _signed(self.card(base_url), self.key, f"{base_url}{JWKS_PATH}")
            body = json.dumps(card, ensure_ascii=False).encode()
            etag = f'W/"{hashlib.sha256(body).hexdigest()[:32]}"'
            self._card_cache = (base_url, body, etag)
        return self._card_cache[1], self._card_cache[2]

    async def _serve_card(self, request: web.Request) -> web.Response:
        body, etag = self._card_body(self.base_url or f"{request.scheme}://{request.host}")
        headers = {"ETag": etag, "Cache-Control": f"public, max-age={self.card_max_age}"}
        if_none_match = request.headers.get("If-None-Match")
        if if_none_match and _etag_matches(if_none_match, etag):
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, content_type="application/json", headers=headers)

    async def _serve_jwks(self, _request: web.Request) -> web.Response:
        headers = {"Cache-Control": f"public, max-age={self.card_max_age}"}
        return web.json_response(public_jwks([self.key]), headers=headers)

    # JSON-RPC

    async def _serve_rpc(self, request: web.Request) -> web.StreamResponse:
        req_id: str | int | None = None
        wire = self._wires[0]  # until the method names one
        try:
            payload = await read_payload(request)
            req_id = request_id(payload)
            wire = select_wire(self._wires, payload)
            op, call = parse_call(wire, payload)
            wire.check_version(request.headers.get("A2A-Version"))
            if op in ("stream", "subscribe"):
                first, queue, task = self._open_stream(wire, op, call)
                return await self._stream(request, wire, req_id, first, queue, task)
            result = await self._unary(wire, op, call)
        except RpcError as err:
            return self._error(wire, req_id, err)
        except Exception:
            log.exception("demo agent %s: unexpected error", self.name)
            error = RpcError(-32603, "Internal error", "INTERNAL_ERROR")
            return self._error(wire, req_id, error)
        return self._json(wire, wire.envelope(req_id, "result", result))

    def _error(self, wire: Wire, req_id: str | int | None, err: RpcError) -> web.Response:
        return self._json(wire, wire.envelope(req_id, "error", wire.error(err)))

    @staticmethod
    def _json(wire: Wire, envelope: dict[str, Any]) -> web.Response:
        text = wire.dumps(envelope, sse=False)
        return web.Response(text=text, content_type="application/json")

    async def _unary(self, wire: Wire, op: str, call: Any) -> Any:
        if op == "send":
            return await self._send(wire, call)
        if op == "get":
            task_id, history_length = call
            return wire.task(self.tasks.find(task_id), history_length)
        if op == "cancel":
            return self.tasks.cancel(wire, call)
        return self.tasks.list(wire, call)

    # operations

    async def _send(self, wire: Wire, call: SendCall) -> dict[str, Any]:
        task = self.tasks.begin(wire, call.message)
        if call.non_blocking:
            snapshot = wire.task_event(task, call.history_length)
            self._launch(task, call)
            return snapshot
        queue = self.tasks.listen(wire, task)
        try:
            self._launch(task, call)
            while (item := await queue.get()) is not None and not item[1]:
                pass
        finally:
            self.tasks.unlisten(task, queue)
        return wire.task_event(task, call.history_length)

    # execution

    def _launch(self, task: Task, call: SendCall) -> None:
        task.runner = asyncio.get_running_loop().create_task(
            self._run(task, call.message, call.accepted), name=f"{self.name}:{task.id}"
        )

    async def _run(self, task: Task, message: Message, accepted: list[str] | None) -> None:
        try:
            await asyncio.sleep(self.chunk_delay)
            self.tasks.set_status(task, "working", self.working_text)
            reply = await self._call_reply(message)
            if reply.input_required:
                await asyncio.sleep(self.chunk_delay)
                self.tasks.set_status(task, "input-required", reply.text)
                return
            await self._emit_artifact(task, self._chunks(reply, accepted))
            await asyncio.sleep(self.chunk_delay)
            self.tasks.set_status(task, "completed")
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("demo agent %s failed on task %s", self.name, task.id)
            self.tasks.set_status(task, "failed", "Sorry, something went wrong in this demo agent.")

    async def _call_reply(self, message: Message) -> ReplyResult:
        text = "\n".join(p["text"] for p in message.parts if p["kind"] == "text")
        reply = self.reply(text, message.parts)
        if inspect.isawaitable(reply):
            reply = await reply
        if not isinstance(reply, ReplyResult):
            raise TypeError(f"reply() returned {type(reply).__name__}, not ReplyResult")
        return reply

    @staticmethod
    def _chunks(reply: ReplyResult, accepted: list[str] | None) -> list[list[Part]]:
        chunks = [[{"kind": "text", "text": t}] for t in _split_text(reply.text, ARTIFACT_CHUNKS)]
        if reply.data is not None and _accepts(accepted, "application/json"):
            chunks.append([{"kind": "data", "data": reply.data}])
        return chunks

    async def _emit_artifact(self, task: Task, chunks: list[list[Part]]) -> None:
        artifact = Artifact(artifact_id=str(uuid.uuid4()), name=self.name)
        task.artifacts.append(artifact)
        for index, parts in enumerate(chunks):
            await asyncio.sleep(self.chunk_delay)
            artifact.parts.extend(parts)
            task.touch()
            chunk = Artifact(artifact.artifact_id, artifact.name, parts)
            last = index == len(chunks) - 1
            event = methodcaller("artifact_event", task, chunk, index > 0, last)
            self.tasks.publish(task, event, False)

    # streaming

    def _open_stream(
        self, wire: Wire, op: str, call: Any
    ) -> tuple[list[dict[str, Any]], Events | None, Task]:
        """First events to write, and the queue that carries the rest (``None``: no more)."""
        if op == "stream":
            task = self.tasks.begin(wire, call.message)
            first = [wire.task_event(task, call.history_length)]
            queue = self.tasks.listen(wire, task)
            self._launch(task, call)
            return first, queue, task
        task = self.tasks.find(call)
        if task.state in TERMINAL_STATES:
            raise wire.terminal_error(task)
        # 1.0 (and 0.3 in compat) starts a subscription with a Task snapshot; 0.3 does not.
        first = [wire.task_event(task)] if wire.subscribe_snapshot else []
        if task.state in INTERRUPTED_STATES:  # nothing runs until the user answers
            return first or [wire.status_event(task, True)], None, task
        return first, self.tasks.listen(wire, task), task

    async def _stream(
        self,
        request: web.Request,
        wire: Wire,
        req_id: str | int | None,
        first: list[dict[str, Any]],
        queue: Events | None,
        task: Task,
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers=SSE_HEADERS)
        try:
            await response.prepare(request)
            for event in first:
                await self._write_event(response, wire, req_id, event)
            while queue is not None and (item := await queue.get()) is not None:
                await self._write_event(response, wire, req_id, item[0])
                if item[1]:
                    break
            await response.write_eof()
        except ConnectionResetError:
            log.debug("client left the stream of task %s", task.id)
        except Exception:  # headers are out: the stream can only end
            log.exception("demo agent %s: stream of task %s failed", self.name, task.id)
        finally:
            self.tasks.unlisten(task, queue)
        return response

    @staticmethod
    async def _write_event(
        response: web.StreamResponse, wire: Wire, req_id: str | int | None, event: dict[str, Any]
    ) -> None:
        data = wire.dumps(wire.envelope(req_id, "result", event), sse=True)
        await response.write(f"data: {data}\r\n\r\n".encode())
