"""The A2A 0.3 and 1.0 JSON-RPC wire formats of the demo agents.

A :class:`Wire` parses wire messages and parts into the neutral model of
:mod:`seeds.demo_model` and renders tasks, results, stream events and errors back, in the
shapes captured from the official a2a-sdk servers in ``protocol/wire/``: :class:`Wire03` as
an a2a-sdk 0.3 server speaks, :class:`Wire10` as a 1.3 server speaks
(:mod:`seeds.demo_compat` has 0.3 as a 1.3 server speaks it in compat mode).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import datetime
from typing import Any

from seeds.demo_model import (
    ALL_STATES,
    Artifact,
    Message,
    Part,
    RpcError,
    Task,
    invalid_params,
    unsupported,
)


def _b64encode(content: bytes) -> str:
    return base64.b64encode(content).decode("ascii")


def _b64decode(text: Any, where: str) -> bytes:
    if not isinstance(text, str):
        raise invalid_params(f"{where} must be a base64 string")
    normalized = text.replace("-", "+").replace("_", "/")
    normalized += "=" * (-len(normalized) % 4)
    try:
        return base64.b64decode(normalized, validate=True)
    except (binascii.Error, ValueError):
        raise invalid_params(f"{where} is not valid base64") from None


def optional_str(raw: dict[str, Any], key: str, where: str) -> str | None:
    """``raw[key]`` when it is a string, ``None`` when absent; else invalid params."""
    value = raw.get(key)
    if value is not None and not isinstance(value, str):
        raise invalid_params(f"{where}.{key} must be a string")
    return value


def _text_part(raw: dict[str, Any], where: str) -> Part:
    if not isinstance(raw.get("text"), str):
        raise invalid_params(f"{where}.text must be a string")
    return {"kind": "text", "text": raw["text"]}


def _extras(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: raw[k] for k in ("metadata", "extensions", "referenceTaskIds") if k in raw}


def check_major(header: str | None, expected: str, major: str, code: int) -> None:
    """a2a-sdk 1.x's version check: a missing/empty header means 0.3; the major must match."""
    actual = (header or "").strip() or "0.3"
    found = re.fullmatch(r"[vV]?(\d+)(?:\.\d+)*", actual)
    if found is None or str(int(found[1])) != major:
        raise RpcError(
            code,
            f"A2A version '{actual}' is not supported by this handler. "
            f"Expected version '{expected}'.",
            "VERSION_NOT_SUPPORTED",
        )


class Wire:
    """What both versions share; :class:`Wire03` and :class:`Wire10` hold the differences.

    Objects are built in the 1.3 SDK's field order; 0.3 sorts keys when it serializes, like
    the 0.3 SDK's generated models do.
    """

    version: str
    methods: dict[str, str]  # wire method name -> operation
    roles: dict[str, str]  # wire role -> "user" | "agent"
    subscribe_snapshot = False  # does a subscription start with a Task snapshot?

    # version specifics

    def state_name(self, state: str) -> str:
        raise NotImplementedError

    def timestamp(self, when: datetime) -> str:
        raise NotImplementedError

    def _parse_content(self, raw: dict[str, Any], where: str) -> Part:
        """A part's content and file fields, everything but its metadata."""
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

    def terminal_send_error(self, task: Task) -> RpcError:
        return self.terminal_error(task)

    def check_version(self, header: str | None) -> None:
        """Raise -32009 when this version cannot serve a request sent with ``header``."""

    def parse_error(self, err: RpcError) -> RpcError:
        """The error to answer when the request's params do not parse (``err``)."""
        return err

    def error(self, err: RpcError) -> dict[str, Any]:
        return {"code": err.code, "message": err.message}

    # shared

    def terminal_error(self, task: Task) -> RpcError:
        """The error for subscribing to a task that has ended (1.0: also for sending to it)."""
        return unsupported(f"Task {task.id} is in terminal state: {self.state_name(task.state)}")

    def parse_state(self, name: str) -> str | None:
        return next((s for s in ALL_STATES if self.state_name(s) == name), None)

    def parse_part(self, raw: Any, where: str) -> Part:
        """One part in the neutral shape described in :mod:`seeds.demo_server`."""
        if not isinstance(raw, dict):
            raise invalid_params(f"{where} must be an object")
        part = self._parse_content(raw, where)
        if "metadata" in raw:
            part["metadata"] = raw["metadata"]
        return part

    def parse_message(self, raw: Any) -> Message:
        if not isinstance(raw, dict):
            raise invalid_params("params.message must be an object")
        message_id = raw.get("messageId")
        if not isinstance(message_id, str) or not message_id:
            raise invalid_params("params.message.messageId must be a non-empty string")
        role_name = raw.get("role")
        role = self.roles.get(role_name) if isinstance(role_name, str) else None
        if role is None:
            raise invalid_params(f"params.message.role must be one of {sorted(self.roles)}")
        parts = raw.get("parts")
        if not isinstance(parts, list) or not parts:
            raise invalid_params("params.message.parts must be a non-empty list")
        return Message(
            role=role,
            parts=[self.parse_part(p, f"params.message.parts[{i}]") for i, p in enumerate(parts)],
            message_id=message_id,
            task_id=optional_str(raw, "taskId", "params.message") or None,
            context_id=optional_str(raw, "contextId", "params.message") or None,
            extras=_extras(raw),
        )

    def message(self, msg: Message) -> dict[str, Any]:
        out: dict[str, Any] = {"messageId": msg.message_id}
        if msg.context_id:
            out["contextId"] = msg.context_id
        if msg.task_id:
            out["taskId"] = msg.task_id
        role = next(name for name, r in self.roles.items() if r == msg.role)
        out |= {"role": role, "parts": [self.part(p) for p in msg.parts]} | msg.extras
        return self.tag("message", out)

    def status(self, task: Task) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state_name(task.state)}
        if task.message is not None:
            out["message"] = self.message(task.message)
        if task.timestamp is not None:
            out["timestamp"] = self.timestamp(task.timestamp)
        return out

    def artifact(self, artifact: Artifact) -> dict[str, Any]:
        parts = [self.part(p) for p in artifact.parts]
        return {"artifactId": artifact.artifact_id, "name": artifact.name, "parts": parts}

    def task(self, task: Task, history_length: int | None = None) -> dict[str, Any]:
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

    def task_event(self, task: Task, history_length: int | None = None) -> dict[str, Any]:
        """The task as a send result or stream event."""
        return self.event("task", self.task(task, history_length))

    def status_event(self, task: Task, final: bool) -> dict[str, Any]:
        body = {"taskId": task.id, "contextId": task.context_id, "status": self.status(task)}
        return self.event("statusUpdate", body, final=final)

    def artifact_event(
        self, task: Task, chunk: Artifact, append: bool, last: bool
    ) -> dict[str, Any]:
        body = {"taskId": task.id, "contextId": task.context_id, "artifact": self.artifact(chunk)}
        return self.event("artifactUpdate", body, append=append, lastChunk=last)

    @staticmethod
    def envelope(req_id: Any, key: str, value: Any) -> dict[str, Any]:
        return {key: value, "id": req_id, "jsonrpc": "2.0"}


class Wire03(Wire):
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

    def _parse_content(self, raw: dict[str, Any], where: str) -> Part:
        kind = raw.get("kind")
        if kind == "text":
            return _text_part(raw, where)
        if kind == "file":
            return self._parse_file(raw.get("file"), f"{where}.file")
        if kind == "data":
            if not isinstance(raw.get("data"), dict):
                raise invalid_params(f"{where}.data must be an object")
            return {"kind": "data", "data": raw["data"]}
        raise invalid_params(f"{where}.kind must be 'text', 'file' or 'data'")

    @staticmethod
    def _parse_file(raw: Any, where: str) -> Part:
        if not isinstance(raw, dict):
            raise invalid_params(f"{where} must be an object")
        if "bytes" in raw:
            content, uri = _b64decode(raw["bytes"], f"{where}.bytes"), None
        elif isinstance(raw.get("uri"), str):
            content, uri = None, raw["uri"]
        else:
            raise invalid_params(f"{where} needs 'bytes' or 'uri'")
        media_type = optional_str(raw, "mimeType", where)
        filename = optional_str(raw, "name", where)
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
                file["bytes"] = _b64encode(part["bytes"])
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
            raise invalid_params("params.configuration.blocking must be a boolean")
        return not blocking

    def dumps(self, obj: Any, sse: bool) -> str:
        return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    def terminal_send_error(self, task: Task) -> RpcError:
        return invalid_params(f"Task {task.id} is in terminal state: {task.state}")


class Wire10(Wire):
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
    subscribe_snapshot = True

    def state_name(self, state: str) -> str:
        return "TASK_STATE_" + state.upper().replace("-", "_")

    def timestamp(self, when: datetime) -> str:
        return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def _parse_content(self, raw: dict[str, Any], where: str) -> Part:
        present = [k for k in ("text", "raw", "url", "data") if k in raw]
        if len(present) != 1:
            raise invalid_params(f"{where} must have exactly one of text, raw, url, data")
        if present == ["text"]:
            part = _text_part(raw, where)
        elif present == ["data"]:
            part = {"kind": "data", "data": raw["data"]}
        elif present == ["raw"]:
            part = {"kind": "file", "bytes": _b64decode(raw["raw"], f"{where}.raw"), "uri": None}
        else:
            part = {"kind": "file", "bytes": None, "uri": optional_str(raw, "url", where)}
        media_type = optional_str(raw, "mediaType", where)
        filename = optional_str(raw, "filename", where)
        if part["kind"] == "file" or media_type or filename:
            part |= {"media_type": media_type, "filename": filename}
        return part

    def part(self, part: Part) -> dict[str, Any]:
        if part["kind"] in ("text", "data"):
            out: dict[str, Any] = {part["kind"]: part[part["kind"]]}
        elif part.get("bytes") is not None:
            out = {"raw": _b64encode(part["bytes"])}
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
            raise invalid_params("params.configuration.returnImmediately must be a boolean")
        return value

    def dumps(self, obj: Any, sse: bool) -> str:
        # Captured 1.3 servers: compact JSON for unary answers, ", "/": " inside SSE events.
        separators = (", ", ": ") if sse else (",", ":")
        return json.dumps(obj, ensure_ascii=False, separators=separators)

    def check_version(self, header: str | None) -> None:
        check_major(header, "1.0", "1", -32009)

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


WIRES: dict[str, Wire] = {"0.3": Wire03(), "1.0": Wire10()}
