"""A small, real A2A JSON-RPC server for the demo agents, speaking either 0.3 or 1.0.

A :class:`DemoAgent` serves its card at the well-known path(s) and JSON-RPC at ``POST /``.
The skill itself is a plain ``reply(text, parts)`` function returning a :class:`ReplyResult`;
this module owns the rest: the wire shapes of both protocol versions (as captured from the
official a2a-sdk servers in ``protocol/wire/``), an in-memory task store, SSE streaming,
multi-turn ``input-required`` tasks, non-blocking sends, cancel, get, subscribe and list.

Parts reach ``reply`` in one version-neutral shape:
``{"kind": "text", "text": str}``, ``{"kind": "data", "data": Any}`` or
``{"kind": "file", "bytes": bytes | None, "uri": str | None, "media_type": str | None,
"filename": str | None}``; each may also carry ``"metadata"``.

Hand-written on aiohttp on purpose: the a2a-sdk is only a test peer.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import inspect
import itertools
import json
import logging
import math
import re
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from aiohttp import web

__all__ = ["CardFactory", "DemoAgent", "Part", "ReplyFunction", "ReplyResult", "RpcError"]

log = logging.getLogger(__name__)

Part = dict[str, Any]
CardFactory = Callable[[str], dict[str, Any]]
ReplyFunction = Callable[[str, list[Part]], "ReplyResult | Awaitable[ReplyResult]"]

TERMINAL_STATES = frozenset({"completed", "canceled", "failed", "rejected"})
INTERRUPTED_STATES = frozenset({"input-required", "auth-required"})
ALL_STATES = TERMINAL_STATES | INTERRUPTED_STATES | {"submitted", "working"}
MAX_REQUEST_BYTES = 8 * 1024 * 1024
ARTIFACT_CHUNKS = 3
_CLOCK = itertools.count()  # orders task updates for ListTasks, newest first
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


class RpcError(Exception):
    """A JSON-RPC error answer. ``reason`` is the A2A ErrorInfo reason (1.0 sends it as data)."""

    def __init__(self, code: int, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason


def _invalid_params(message: str) -> RpcError:
    return RpcError(-32602, message, "INVALID_PARAMS")


def _task_not_found(task_id: str) -> RpcError:
    return RpcError(-32001, f"Task not found: {task_id}", "TASK_NOT_FOUND")


def _unsupported(message: str) -> RpcError:
    return RpcError(-32004, message, "UNSUPPORTED_OPERATION")


# A listener's queue: (rendered event, is it the last one) pairs; None ends the stream.
_Events = asyncio.Queue[tuple[dict[str, Any], bool] | None]


# --- the version-neutral task model ------------------------------------------------------------


@dataclass
class _Message:
    role: str  # "user" | "agent"
    parts: list[Part]
    message_id: str
    task_id: str | None = None
    context_id: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)  # metadata, extensions, referenceTaskIds


@dataclass
class _Artifact:
    artifact_id: str
    name: str
    parts: list[Part] = field(default_factory=list)


@dataclass
class _Task:
    id: str
    context_id: str
    state: str = "submitted"
    message: _Message | None = None
    timestamp: datetime | None = None
    artifacts: list[_Artifact] = field(default_factory=list)
    history: list[_Message] = field(default_factory=list)
    updated: int = field(default_factory=lambda: next(_CLOCK))
    runner: asyncio.Task[None] | None = None
    listeners: list[_Events] = field(default_factory=list)


@dataclass
class _SendCall:
    message: _Message
    non_blocking: bool
    accepted: list[str] | None
    history_length: int | None


@dataclass
class _ListCall:
    context_id: str | None
    state: str | None
    page_size: int
    offset: int
    history_length: int | None
    include_artifacts: bool


# --- wire shapes ---------------------------------------------------------------------------------


def _b64decode(text: Any, where: str) -> bytes:
    if not isinstance(text, str):
        raise _invalid_params(f"{where} must be a base64 string")
    normalized = text.replace("-", "+").replace("_", "/")
    normalized += "=" * (-len(normalized) % 4)
    try:
        return base64.b64decode(normalized, validate=True)
    except (binascii.Error, ValueError):
        raise _invalid_params(f"{where} is not valid base64") from None


def _optional_str(raw: dict[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, str):
        raise _invalid_params(f"{where}.{key} must be a string")
    return value


def _extras(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: raw[k] for k in ("metadata", "extensions", "referenceTaskIds") if k in raw}


class _Wire:
    """What both versions share; :class:`_Wire03` and :class:`_Wire10` hold the differences.

    Objects are built in the 1.3 SDK's field order; 0.3 sorts keys when it serializes, like
    the 0.3 SDK's generated models do.
    """

    version: str
    methods: dict[str, str]  # wire method name -> operation
    roles: dict[str, str]  # wire role -> "user" | "agent"

    # version specifics

    def state_name(self, state: str) -> str:
        raise NotImplementedError

    def timestamp(self, when: datetime) -> str:
        raise NotImplementedError

    def parse_part(self, raw: Any, where: str) -> Part:
        raise NotImplementedError

    def part(self, part: Part) -> dict[str, Any]:
        raise NotImplementedError

    def tag(self, name: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Mark a ``task``/``message`` object with its type (0.3's ``kind``)."""
        return obj

    def event(self, name: str, body: dict[str, Any], **flags: bool) -> dict[str, Any]:
        """A result or stream event: ``task``, ``statusUpdate`` or ``artifactUpdate``."""
        raise NotImplementedError

    def returns_immediately(self, config: dict[str, Any]) -> bool:
        raise NotImplementedError

    def dumps(self, obj: Any, sse: bool) -> str:
        raise NotImplementedError

    def terminal_send_error(self, task: _Task) -> RpcError:
        raise NotImplementedError

    def check_version(self, header: str | None) -> None:
        """Raise -32009 when this version cannot serve a request sent with ``header``."""

    def error(self, err: RpcError) -> dict[str, Any]:
        return {"code": err.code, "message": err.message}

    # shared

    def parse_state(self, name: str) -> str | None:
        return next((s for s in ALL_STATES if self.state_name(s) == name), None)

    def parse_message(self, raw: Any) -> _Message:
        if not isinstance(raw, dict):
            raise _invalid_params("params.message must be an object")
        message_id = raw.get("messageId")
        if not isinstance(message_id, str) or not message_id:
            raise _invalid_params("params.message.messageId must be a non-empty string")
        role_name = raw.get("role")
        role = self.roles.get(role_name) if isinstance(role_name, str) else None
        if role is None:
            raise _invalid_params(f"params.message.role must be one of {sorted(self.roles)}")
        parts = raw.get("parts")
        if not isinstance(parts, list) or not parts:
            raise _invalid_params("params.message.parts must be a non-empty list")
        return _Message(
            role=role,
            parts=[self.parse_part(p, f"params.message.parts[{i}]") for i, p in enumerate(parts)],
            message_id=message_id,
            task_id=_optional_str(raw, "taskId", "params.message") or None,
            context_id=_optional_str(raw, "contextId", "params.message") or None,
            extras=_extras(raw),
        )

    def message(self, msg: _Message) -> dict[str, Any]:
        out: dict[str, Any] = {"messageId": msg.message_id}
        if msg.context_id:
            out["contextId"] = msg.context_id
        if msg.task_id:
            out["taskId"] = msg.task_id
        role = next(name for name, r in self.roles.items() if r == msg.role)
        out |= {"role": role, "parts": [self.part(p) for p in msg.parts]} | msg.extras
        return self.tag("message", out)

    def status(self, task: _Task) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state_name(task.state)}
        if task.message is not None:
            out["message"] = self.message(task.message)
        if task.timestamp is not None:
            out["timestamp"] = self.timestamp(task.timestamp)
        return out

    def artifact(self, artifact: _Artifact) -> dict[str, Any]:
        parts = [self.part(p) for p in artifact.parts]
        return {"artifactId": artifact.artifact_id, "name": artifact.name, "parts": parts}

    def task(self, task: _Task, history_length: int | None = None) -> dict[str, Any]:
        """The Task object itself (the ``GetTask``/``CancelTask`` result)."""
        out: dict[str, Any] = {"id": task.id, "contextId": task.context_id}
        out["status"] = self.status(task)
        if task.artifacts:
            out["artifacts"] = [self.artifact(a) for a in task.artifacts]
        history = task.history
        if history_length is not None:
            history = history[-history_length:] if history_length else []
        if history:
            out["history"] = [self.message(m) for m in history]
        return self.tag("task", out)

    def status_event(self, task: _Task, final: bool) -> dict[str, Any]:
        body = {"taskId": task.id, "contextId": task.context_id, "status": self.status(task)}
        return self.event("statusUpdate", body, final=final)

    def artifact_event(
        self, task: _Task, chunk: _Artifact, append: bool, last: bool
    ) -> dict[str, Any]:
        body = {"taskId": task.id, "contextId": task.context_id, "artifact": self.artifact(chunk)}
        return self.event("artifactUpdate", body, append=append, lastChunk=last)

    @staticmethod
    def envelope(req_id: Any, key: str, value: Any) -> dict[str, Any]:
        return {key: value, "id": req_id, "jsonrpc": "2.0"}


class _Wire03(_Wire):
    """A2A 0.3: ``kind`` discriminators, lowercase states, bare results, ``final`` flags."""

    version = "0.3"
    methods = {
        "message/send": "send",
        "message/stream": "stream",
        "tasks/get": "get",
        "tasks/cancel": "cancel",
        "tasks/resubscribe": "subscribe",
    }
    roles = {"user": "user", "agent": "agent"}
    _KINDS = {
        "task": "task",
        "message": "message",
        "statusUpdate": "status-update",
        "artifactUpdate": "artifact-update",
    }

    def state_name(self, state: str) -> str:
        return state

    def timestamp(self, when: datetime) -> str:
        return when.isoformat()

    def parse_part(self, raw: Any, where: str) -> Part:
        if not isinstance(raw, dict):
            raise _invalid_params(f"{where} must be an object")
        kind = raw.get("kind")
        if kind == "text":
            if not isinstance(raw.get("text"), str):
                raise _invalid_params(f"{where}.text must be a string")
            part: Part = {"kind": "text", "text": raw["text"]}
        elif kind == "file":
            part = self._parse_file(raw.get("file"), f"{where}.file")
        elif kind == "data":
            if not isinstance(raw.get("data"), dict):
                raise _invalid_params(f"{where}.data must be an object")
            part = {"kind": "data", "data": raw["data"]}
        else:
            raise _invalid_params(f"{where}.kind must be 'text', 'file' or 'data'")
        if "metadata" in raw:
            part["metadata"] = raw["metadata"]
        return part

    @staticmethod
    def _parse_file(raw: Any, where: str) -> Part:
        if not isinstance(raw, dict):
            raise _invalid_params(f"{where} must be an object")
        if "bytes" in raw:
            content, uri = _b64decode(raw["bytes"], f"{where}.bytes"), None
        elif isinstance(raw.get("uri"), str):
            content, uri = None, raw["uri"]
        else:
            raise _invalid_params(f"{where} needs 'bytes' or 'uri'")
        media_type = _optional_str(raw, "mimeType", where)
        filename = _optional_str(raw, "name", where)
        return {"kind": "file", "bytes": content, "uri": uri} | {
            "media_type": media_type,
            "filename": filename,
        }

    def part(self, part: Part) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": part["kind"]}
        if part["kind"] in ("text", "data"):
            out[part["kind"]] = part[part["kind"]]
        else:
            file: dict[str, Any] = {}
            if part.get("bytes") is not None:
                file["bytes"] = base64.b64encode(part["bytes"]).decode("ascii")
            else:
                file["uri"] = part["uri"]
            if part.get("media_type"):
                file["mimeType"] = part["media_type"]
            if part.get("filename"):
                file["name"] = part["filename"]
            out["file"] = file
        if "metadata" in part:
            out["metadata"] = part["metadata"]
        return out

    def tag(self, name: str, obj: dict[str, Any]) -> dict[str, Any]:
        return obj | {"kind": self._KINDS[name]}

    def event(self, name: str, body: dict[str, Any], **flags: bool) -> dict[str, Any]:
        return self.tag(name, body) | flags

    def returns_immediately(self, config: dict[str, Any]) -> bool:
        blocking = config.get("blocking", True)
        if not isinstance(blocking, bool):
            raise _invalid_params("params.configuration.blocking must be a boolean")
        return not blocking

    def dumps(self, obj: Any, sse: bool) -> str:
        return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    def terminal_send_error(self, task: _Task) -> RpcError:
        return _invalid_params(f"Task {task.id} is in terminal state: {task.state}")


class _Wire10(_Wire):
    """A2A 1.0: exclusive part fields, enum names, ``{"task": ...}`` wrappers, no ``final``."""

    version = "1.0"
    methods = {
        "SendMessage": "send",
        "SendStreamingMessage": "stream",
        "GetTask": "get",
        "CancelTask": "cancel",
        "SubscribeToTask": "subscribe",
        "ListTasks": "list",
    }
    roles = {"ROLE_USER": "user", "ROLE_AGENT": "agent"}

    def state_name(self, state: str) -> str:
        return "TASK_STATE_" + state.upper().replace("-", "_")

    def timestamp(self, when: datetime) -> str:
        return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def parse_part(self, raw: Any, where: str) -> Part:
        if not isinstance(raw, dict):
            raise _invalid_params(f"{where} must be an object")
        present = [k for k in ("text", "raw", "url", "data") if k in raw]
        if len(present) != 1:
            raise _invalid_params(f"{where} must have exactly one of text, raw, url, data")
        if present == ["text"]:
            if not isinstance(raw["text"], str):
                raise _invalid_params(f"{where}.text must be a string")
            part: Part = {"kind": "text", "text": raw["text"]}
        elif present == ["data"]:
            part = {"kind": "data", "data": raw["data"]}
        elif present == ["raw"]:
            part = {"kind": "file", "bytes": _b64decode(raw["raw"], f"{where}.raw"), "uri": None}
        else:
            part = {"kind": "file", "bytes": None, "uri": _optional_str(raw, "url", where)}
        media_type = _optional_str(raw, "mediaType", where)
        filename = _optional_str(raw, "filename", where)
        if part["kind"] == "file" or media_type or filename:
            part |= {"media_type": media_type, "filename": filename}
        if "metadata" in raw:
            part["metadata"] = raw["metadata"]
        return part

    def part(self, part: Part) -> dict[str, Any]:
        if part["kind"] in ("text", "data"):
            out: dict[str, Any] = {part["kind"]: part[part["kind"]]}
        elif part.get("bytes") is not None:
            out = {"raw": base64.b64encode(part["bytes"]).decode("ascii")}
        else:
            out = {"url": part["uri"]}
        if "metadata" in part:
            out["metadata"] = part["metadata"]
        if part.get("filename"):
            out["filename"] = part["filename"]
        if part.get("media_type"):
            out["mediaType"] = part["media_type"]
        return out

    def event(self, name: str, body: dict[str, Any], **flags: bool) -> dict[str, Any]:
        # 1.x omits false booleans and has no `final`: a stream ends after a final state.
        return {name: body | {k: True for k, v in flags.items() if v and k != "final"}}

    def returns_immediately(self, config: dict[str, Any]) -> bool:
        value = config.get("returnImmediately", False)
        if not isinstance(value, bool):
            raise _invalid_params("params.configuration.returnImmediately must be a boolean")
        return value

    def dumps(self, obj: Any, sse: bool) -> str:
        # Captured 1.3 servers: compact JSON for unary answers, ", "/": " inside SSE events.
        separators = (", ", ": ") if sse else (",", ":")
        return json.dumps(obj, ensure_ascii=False, separators=separators)

    def terminal_send_error(self, task: _Task) -> RpcError:
        name = self.state_name(task.state)
        return _unsupported(f"Task {task.id} is in terminal state: {name}")

    def check_version(self, header: str | None) -> None:
        actual = (header or "").strip() or "0.3"
        if actual.lstrip("vV").split(".", 1)[0] != "1":
            raise RpcError(
                -32009,
                f"A2A version '{actual}' is not supported by this handler. Expected version '1.0'.",
                "VERSION_NOT_SUPPORTED",
            )

    def error(self, err: RpcError) -> dict[str, Any]:
        out = super().error(err)
        if err.reason:
            info = {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": err.reason,
                "domain": "a2a-protocol.org",
                "metadata": {},
            }
            out["data"] = [info]
        return out


_WIRES: dict[str, _Wire] = {"0.3": _Wire03(), "1.0": _Wire10()}


# --- small helpers -------------------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(UTC)


def _request_id(payload: Any) -> str | int | None:
    """The request ``id`` when it is readable and valid, else ``None``."""
    if not isinstance(payload, dict):
        return None
    req_id = payload.get("id")
    if isinstance(req_id, bool) or not isinstance(req_id, str | int):
        return None
    return req_id


def _envelope(payload: Any) -> tuple[str, dict[str, Any]]:
    """Validate a JSON-RPC 2.0 request object; return its method and params."""
    if isinstance(payload, list):
        raise RpcError(-32600, "Batch requests are not supported")
    if not isinstance(payload, dict):
        raise RpcError(-32600, "Request payload validation error: expected a JSON object")
    if payload.get("jsonrpc") != "2.0":
        raise RpcError(-32600, "Request payload validation error: 'jsonrpc' must be '2.0'")
    if "id" in payload and payload["id"] is not None and _request_id(payload) is None:
        raise RpcError(-32600, "Request payload validation error: bad 'id' type")
    method = payload.get("method")
    if not isinstance(method, str) or not method:
        raise RpcError(-32600, "Request payload validation error: 'method' must be a string")
    params = payload.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise _invalid_params("params must be an object")
    return method, params


def _history_length(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _invalid_params(f"{where} must be a non-negative integer")
    return value


def _task_id(params: dict[str, Any]) -> str:
    task_id = params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise _invalid_params("params.id must be a non-empty string")
    return task_id


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
        if version not in _WIRES:
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
        self._wire = _WIRES[version]
        self._tasks: OrderedDict[str, _Task] = OrderedDict()
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
            payload = await self._read_json(request)
            req_id = _request_id(payload)
            method, params = _envelope(payload)
            op = self._wire.methods.get(method)
            if op is None:
                raise RpcError(-32601, f"Method not found: {method}")
            call = self._parse_call(op, params)
            self._wire.check_version(request.headers.get("A2A-Version"))
            if op in ("stream", "subscribe"):
                first, queue, task = self._open_stream(op, call)
                return await self._stream(request, req_id, first, queue, task)
            result = await self._unary(op, call)
        except RpcError as err:
            return self._json(self._wire.envelope(req_id, "error", self._wire.error(err)))
        except Exception:
            log.exception("demo agent %s: unexpected error", self.name)
            err = RpcError(-32603, "Internal error", "INTERNAL_ERROR")
            return self._json(self._wire.envelope(req_id, "error", self._wire.error(err)))
        return self._json(self._wire.envelope(req_id, "result", result))

    @staticmethod
    async def _read_json(request: web.Request) -> Any:
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise RpcError(-32600, "Payload too large") from None
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            raise RpcError(-32700, "Invalid JSON payload") from None

    def _json(self, envelope: dict[str, Any]) -> web.Response:
        text = self._wire.dumps(envelope, sse=False)
        return web.Response(text=text, content_type="application/json")

    def _parse_call(self, op: str, params: dict[str, Any]) -> Any:
        if op in ("send", "stream"):
            return self._parse_send(params)
        if op == "get":
            where = "params.historyLength"
            return _task_id(params), _history_length(params.get("historyLength"), where)
        if op == "list":
            return self._parse_list(params)
        return _task_id(params)

    def _parse_send(self, params: dict[str, Any]) -> _SendCall:
        message = self._wire.parse_message(params.get("message"))
        config = params.get("configuration") or {}
        if not isinstance(config, dict):
            raise _invalid_params("params.configuration must be an object")
        accepted = config.get("acceptedOutputModes")
        if accepted is not None and not (
            isinstance(accepted, list) and all(isinstance(m, str) for m in accepted)
        ):
            raise _invalid_params("acceptedOutputModes must be a list of strings")
        where = "params.configuration.historyLength"
        return _SendCall(
            message=message,
            non_blocking=self._wire.returns_immediately(config),
            accepted=accepted,
            history_length=_history_length(config.get("historyLength"), where),
        )

    def _parse_list(self, params: dict[str, Any]) -> _ListCall:
        state = None
        if params.get("status"):
            state = self._wire.parse_state(params["status"])
            if state is None:
                raise _invalid_params("params.status is not a task state")
        page_size = params.get("pageSize", 50)
        if isinstance(page_size, bool) or not isinstance(page_size, int):
            raise _invalid_params("params.pageSize must be an integer")
        if not 1 <= page_size <= 100:
            raise _invalid_params("params.pageSize must be between 1 and 100")
        token = params.get("pageToken") or "0"
        if not isinstance(token, str) or not token.isdigit():
            raise _invalid_params("params.pageToken is not a token this agent issued")
        return _ListCall(
            context_id=_optional_str(params, "contextId", "params"),
            state=state,
            page_size=page_size,
            offset=int(token),
            history_length=_history_length(params.get("historyLength"), "params.historyLength"),
            include_artifacts=params.get("includeArtifacts") is True,
        )

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

    def _find(self, task_id: str) -> _Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise _task_not_found(task_id)
        return task

    def _store(self, task: _Task) -> None:
        self._tasks[task.id] = task
        while len(self._tasks) > self.max_tasks:
            oldest = next(iter(self._tasks.values()))
            if oldest.runner is not None and not oldest.runner.done():
                break
            self._tasks.popitem(last=False)

    def _begin(self, message: _Message) -> _Task:
        """Open a new task for ``message``, or continue the task it names."""
        if message.task_id:
            task = self._find(message.task_id)
            if message.context_id and message.context_id != task.context_id:
                raise _invalid_params(
                    f"Context {message.context_id} does not match context "
                    f"{task.context_id} of task {task.id}"
                )
            if task.state in TERMINAL_STATES:
                raise self._wire.terminal_send_error(task)
            if task.state not in INTERRUPTED_STATES:
                raise _unsupported(f"Task {task.id} is still running; wait for it to ask")
        else:
            task = _Task(id=str(uuid.uuid4()), context_id=message.context_id or str(uuid.uuid4()))
            self._store(task)
        message.task_id, message.context_id = task.id, task.context_id
        if task.message is not None:
            task.history.append(task.message)
        task.state, task.message, task.timestamp = "submitted", None, None
        task.history.append(message)
        task.updated = next(_CLOCK)
        return task

    def _listen(self, task: _Task) -> _Events:
        queue: _Events = asyncio.Queue()
        task.listeners.append(queue)
        return queue

    @staticmethod
    def _unlisten(task: _Task, queue: _Events | None) -> None:
        if queue is not None and queue in task.listeners:
            task.listeners.remove(queue)

    def _publish(self, task: _Task, event: dict[str, Any], final: bool) -> None:
        for queue in task.listeners:
            queue.put_nowait((event, final))

    def _set_status(self, task: _Task, state: str, text: str | None = None) -> None:
        """Move the task to ``state`` (the old status message goes to history) and publish."""
        if task.state in TERMINAL_STATES:
            return
        if task.message is not None:
            task.history.append(task.message)
        task.state, task.timestamp, task.updated = state, _now(), next(_CLOCK)
        task.message = None
        if text is not None:
            task.message = _Message(
                role="agent",
                parts=[{"kind": "text", "text": text}],
                message_id=str(uuid.uuid4()),
                task_id=task.id,
                context_id=task.context_id,
            )
        final = state in TERMINAL_STATES or state in INTERRUPTED_STATES
        self._publish(task, self._wire.status_event(task, final), final)

    # operations

    async def _send(self, call: _SendCall) -> dict[str, Any]:
        task = self._begin(call.message)
        if call.non_blocking:
            snapshot = self._wire.task(task, call.history_length)
            self._launch(task, call)
            return self._wire.event("task", snapshot)
        queue = self._listen(task)
        try:
            self._launch(task, call)
            while (item := await queue.get()) is not None and not item[1]:
                pass
        finally:
            self._unlisten(task, queue)
        return self._wire.event("task", self._wire.task(task, call.history_length))

    def _cancel(self, task_id: str) -> dict[str, Any]:
        task = self._find(task_id)
        if task.state in TERMINAL_STATES:
            raise RpcError(-32002, "Task cannot be canceled", "TASK_NOT_CANCELABLE")
        if task.runner is not None and not task.runner.done():
            task.runner.cancel()
        self._set_status(task, "canceled")
        return self._wire.task(task)

    def _list(self, call: _ListCall) -> dict[str, Any]:
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

    def _launch(self, task: _Task, call: _SendCall) -> None:
        task.runner = asyncio.get_running_loop().create_task(
            self._run(task, call.message, call.accepted), name=f"{self.name}:{task.id}"
        )

    async def _run(self, task: _Task, message: _Message, accepted: list[str] | None) -> None:
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

    async def _call_reply(self, message: _Message) -> ReplyResult:
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

    async def _emit_artifact(self, task: _Task, chunks: list[list[Part]]) -> None:
        artifact = _Artifact(artifact_id=str(uuid.uuid4()), name=self.name)
        task.artifacts.append(artifact)
        for index, parts in enumerate(chunks):
            await asyncio.sleep(self.chunk_delay)
            artifact.parts.extend(parts)
            task.updated = next(_CLOCK)
            chunk = _Artifact(artifact.artifact_id, artifact.name, parts)
            last = index == len(chunks) - 1
            self._publish(task, self._wire.artifact_event(task, chunk, index > 0, last), False)

    # streaming

    def _open_stream(
        self, op: str, call: Any
    ) -> tuple[list[dict[str, Any]], _Events | None, _Task]:
        """First events to write, and the queue that carries the rest (``None``: no more)."""
        if op == "stream":
            task = self._begin(call.message)
            first = [self._wire.event("task", self._wire.task(task, call.history_length))]
            queue = self._listen(task)
            self._launch(task, call)
            return first, queue, task
        task = self._find(call)
        if task.state in TERMINAL_STATES:
            name = self._wire.state_name(task.state)
            raise _unsupported(f"Task {task.id} is in terminal state: {name}")
        # 1.0 starts a subscription with a Task snapshot; 0.3 sends only later events.
        first = [self._wire.event("task", self._wire.task(task))] if self.version == "1.0" else []
        if task.state in INTERRUPTED_STATES:  # nothing runs until the user answers
            return first or [self._wire.status_event(task, True)], None, task
        return first, self._listen(task), task

    async def _stream(
        self,
        request: web.Request,
        req_id: str | int | None,
        first: list[dict[str, Any]],
        queue: _Events | None,
        task: _Task,
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
