"""A small, real A2A JSON-RPC server for the demo agents, speaking either 0.3 or 1.0.

A :class:`DemoAgent` serves its card at the well-known path(s) and JSON-RPC at ``POST /``.
The skill itself is a plain ``reply(text, parts)`` function returning a :class:`ReplyResult`;
this module owns the rest: an in-memory task store, SSE streaming, multi-turn
``input-required`` tasks, non-blocking sends, cancel, get, subscribe and list. The wire
shapes of both protocol versions live in :mod:`seeds.demo_wire`, request parsing in
:mod:`seeds.demo_rpc`, the task model in :mod:`seeds.demo_model`.

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
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from aiohttp import web

from seeds.demo_model import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    Artifact,
    Events,
    Message,
    Part,
    RpcError,
    Task,
    invalid_params,
    task_not_found,
    unsupported,
)
from seeds.demo_rpc import ListCall, SendCall, parse_request, read_payload, request_id
from seeds.demo_wire import WIRES

__all__ = ["CardFactory", "DemoAgent", "Part", "ReplyFunction", "ReplyResult", "RpcError"]

log = logging.getLogger(__name__)

CardFactory = Callable[[str], dict[str, Any]]
ReplyFunction = Callable[[str, list[Part]], "ReplyResult | Awaitable[ReplyResult]"]

MAX_REQUEST_BYTES = 8 * 1024 * 1024
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


def _url_host(host: str) -> str:
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


# --- the agent -----------------------------------------------------------------------------------


class DemoAgent:
    """One A2A agent: a card, a reply function, and the JSON-RPC/SSE server around them.

    ``card(base_url)`` builds the card once the agent knows where it is bound. Every answer
    streams as: task (submitted), status working, ``ARTIFACT_CHUNKS`` artifact chunks (plus a
    data chunk), status completed; ``chunk_delay`` seconds pass before each step.
    """

    def __init__(
        self,
        name: str,
        version: Literal["0.3", "1.0"],
        card: CardFactory,
        reply: ReplyFunction,
        *,
        chunk_delay: float = 0.0,
        working_text: str = "Working on it...",
        card_max_age: int = 300,
        max_tasks: int = 1000,
    ) -> None:
        if version not in WIRES:
            raise ValueError(f"unsupported A2A version {version!r}; use '0.3' or '1.0'")
        self.name = name
        self.version = version
        self.card = card
        self.reply = reply
        self.chunk_delay = chunk_delay
        self.working_text = working_text
        self.card_max_age = card_max_age
        self.max_tasks = max_tasks
        self.base_url: str | None = None
        self._wire = WIRES[version]
        self._tasks: OrderedDict[str, Task] = OrderedDict()
        self._runner: web.AppRunner | None = None
        self._card_cache: tuple[str, bytes, str] | None = None

    # lifecycle

    def make_app(self) -> web.Application:
        """The aiohttp application: card route(s) and JSON-RPC at ``POST /``."""
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_get("/.well-known/agent-card.json", self._serve_card)
        if self.version == "0.3":
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
        running = []
        for task in self._tasks.values():
            for queue in task.listeners:
                queue.put_nowait(None)
            if task.runner is not None and not task.runner.done():
                task.runner.cancel()
                running.append(task.runner)
        await asyncio.gather(*running, return_exceptions=True)

    # card

    def _card_body(self, base_url: str) -> tuple[bytes, str]:
        if self._card_cache is None or self._card_cache[0] != base_url:
            body = json.dumps(self.card(base_url), ensure_ascii=False).encode()
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

    # JSON-RPC

    async def _serve_rpc(self, request: web.Request) -> web.StreamResponse:
        req_id: str | int | None = None
        try:
            payload = await read_payload(request)
            req_id = request_id(payload)
            op, call = parse_request(self._wire, payload)
            self._wire.check_version(request.headers.get("A2A-Version"))
            if op in ("stream", "subscribe"):
                first, queue, task = self._open_stream(op, call)
                return await self._stream(request, req_id, first, queue, task)
            result = await self._unary(op, call)
        except RpcError as err:
            return self._error(req_id, err)
        except Exception:
            log.exception("demo agent %s: unexpected error", self.name)
            return self._error(req_id, RpcError(-32603, "Internal error", "INTERNAL_ERROR"))
        return self._json(self._wire.envelope(req_id, "result", result))

    def _error(self, req_id: str | int | None, err: RpcError) -> web.Response:
        return self._json(self._wire.envelope(req_id, "error", self._wire.error(err)))

    def _json(self, envelope: dict[str, Any]) -> web.Response:
        text = self._wire.dumps(envelope, sse=False)
        return web.Response(text=text, content_type="application/json")

    async def _unary(self, op: str, call: Any) -> Any:
        if op == "send":
            return await self._send(call)
        if op == "get":
            task_id, history_length = call
            return self._wire.task(self._find(task_id), history_length)
        if op == "cancel":
            return self._cancel(call)
        return self._list(call)

    # task store

    def _find(self, task_id: str) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise task_not_found(task_id)
        return task

    def _store(self, task: Task) -> None:
        self._tasks[task.id] = task
        while len(self._tasks) > self.max_tasks:
            oldest = next(iter(self._tasks.values()))
            if oldest.runner is not None and not oldest.runner.done():
                break
            self._tasks.popitem(last=False)

    def _begin(self, message: Message) -> Task:
        """Open a new task for ``message``, or continue the task it names."""
        if message.task_id:
            task = self._find(message.task_id)
            if message.context_id and message.context_id != task.context_id:
                raise invalid_params(
                    f"Context {message.context_id} does not match context "
                    f"{task.context_id} of task {task.id}"
                )
            if task.state in TERMINAL_STATES:
                raise self._wire.terminal_send_error(task)
            if task.state not in INTERRUPTED_STATES:
                raise unsupported(f"Task {task.id} is still running; wait for it to ask")
        else:
            task = Task(id=str(uuid.uuid4()), context_id=message.context_id or str(uuid.uuid4()))
            self._store(task)
        message.task_id, message.context_id = task.id, task.context_id
        task.set_status("submitted")
        task.history.append(message)
        return task

    def _listen(self, task: Task) -> Events:
        queue: Events = asyncio.Queue()
        task.listeners.append(queue)
        return queue

    @staticmethod
    def _unlisten(task: Task, queue: Events | None) -> None:
        if queue is not None and queue in task.listeners:
            task.listeners.remove(queue)

    def _publish(self, task: Task, event: dict[str, Any], final: bool) -> None:
        for queue in task.listeners:
            queue.put_nowait((event, final))

    def _set_status(self, task: Task, state: str, text: str | None = None) -> None:
        """Move the task to ``state`` (the old status message goes to history) and publish."""
        if task.state in TERMINAL_STATES:
            return
        message = None
        if text is not None:
            message = Message(
                role="agent",
                parts=[{"kind": "text", "text": text}],
                message_id=str(uuid.uuid4()),
                task_id=task.id,
                context_id=task.context_id,
            )
        task.set_status(state, message, datetime.now(UTC))
        final = state in TERMINAL_STATES or state in INTERRUPTED_STATES
        self._publish(task, self._wire.status_event(task, final), final)

    # operations

    async def _send(self, call: SendCall) -> dict[str, Any]:
        task = self._begin(call.message)
        if call.non_blocking:
            snapshot = self._wire.task_event(task, call.history_length)
            self._launch(task, call)
            return snapshot
        queue = self._listen(task)
        try:
            self._launch(task, call)
            while (item := await queue.get()) is not None and not item[1]:
                pass
        finally:
            self._unlisten(task, queue)
        return self._wire.task_event(task, call.history_length)

    def _cancel(self, task_id: str) -> dict[str, Any]:
        task = self._find(task_id)
        if task.state in TERMINAL_STATES:
            raise RpcError(-32002, "Task cannot be canceled", "TASK_NOT_CANCELABLE")
        if task.runner is not None and not task.runner.done():
            task.runner.cancel()
        self._set_status(task, "canceled")
        return self._wire.task(task)

    def _list(self, call: ListCall) -> dict[str, Any]:
        tasks = sorted(self._tasks.values(), key=lambda t: t.updated, reverse=True)
        tasks = [
            t
            for t in tasks
            if (call.context_id is None or t.context_id == call.context_id)
            and (call.state is None or t.state == call.state)
        ]
        page = tasks[call.offset : call.offset + call.page_size]
        rendered = [self._wire.task(t, call.history_length) for t in page]
        if not call.include_artifacts:
            for task in rendered:
                task.pop("artifacts", None)
        more = call.offset + call.page_size < len(tasks)
        return {
            "tasks": rendered,
            "nextPageToken": str(call.offset + call.page_size) if more else "",
            "pageSize": call.page_size,
            "totalSize": len(tasks),
        }

    # execution

    def _launch(self, task: Task, call: SendCall) -> None:
        task.runner = asyncio.get_running_loop().create_task(
            self._run(task, call.message, call.accepted), name=f"{self.name}:{task.id}"
        )

    async def _run(self, task: Task, message: Message, accepted: list[str] | None) -> None:
        try:
            await asyncio.sleep(self.chunk_delay)
            self._set_status(task, "working", self.working_text)
            reply = await self._call_reply(message)
            if reply.input_required:
                await asyncio.sleep(self.chunk_delay)
                self._set_status(task, "input-required", reply.text)
                return
            await self._emit_artifact(task, self._chunks(reply, accepted))
            await asyncio.sleep(self.chunk_delay)
            self._set_status(task, "completed")
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("demo agent %s failed on task %s", self.name, task.id)
            self._set_status(task, "failed", "Sorry, something went wrong in this demo agent.")

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
            self._publish(task, self._wire.artifact_event(task, chunk, index > 0, last), False)

    # streaming

    def _open_stream(self, op: str, call: Any) -> tuple[list[dict[str, Any]], Events | None, Task]:
        """First events to write, and the queue that carries the rest (``None``: no more)."""
        if op == "stream":
            task = self._begin(call.message)
            first = [self._wire.task_event(task, call.history_length)]
            queue = self._listen(task)
            self._launch(task, call)
            return first, queue, task
        task = self._find(call)
        if task.state in TERMINAL_STATES:
            raise self._wire.terminal_error(task)
        # 1.0 starts a subscription with a Task snapshot; 0.3 sends only later events.
        first = [self._wire.task_event(task)] if self.version == "1.0" else []
        if task.state in INTERRUPTED_STATES:  # nothing runs until the user answers
            return first or [self._wire.status_event(task, True)], None, task
        return first, self._listen(task), task

    async def _stream(
        self,
        request: web.Request,
        req_id: str | int | None,
        first: list[dict[str, Any]],
        queue: Events | None,
        task: Task,
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers=SSE_HEADERS)
        try:
            await response.prepare(request)
            for event in first:
                await self._write_event(response, req_id, event)
            while queue is not None and (item := await queue.get()) is not None:
                await self._write_event(response, req_id, item[0])
                if item[1]:
                    break
            await response.write_eof()
        except ConnectionResetError:
            log.debug("client left the stream of task %s", task.id)
        except Exception:  # headers are out: the stream can only end
            log.exception("demo agent %s: stream of task %s failed", self.name, task.id)
        finally:
            self._unlisten(task, queue)
        return response

    async def _write_event(
        self, response: web.StreamResponse, req_id: str | int | None, event: dict[str, Any]
    ) -> None:
        data = self._wire.dumps(self._wire.envelope(req_id, "result", event), sse=True)
        await response.write(f"data: {data}\r\n\r\n".encode())
