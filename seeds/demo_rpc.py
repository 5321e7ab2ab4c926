"""JSON-RPC requests to the demo agents: from the HTTP body to a validated operation call.

Every problem is raised as the :class:`~seeds.demo_model.RpcError` to answer with.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from seeds.demo_model import Message, RpcError, invalid_params
from seeds.demo_wire import Wire, optional_str


@dataclass
class SendCall:
    message: Message
    non_blocking: bool
    accepted: list[str] | None
    history_length: int | None


@dataclass
class ListCall:
    context_id: str | None
    state: str | None
    page_size: int
    offset: int
    history_length: int | None
    include_artifacts: bool


# What parse_call returns for each operation: send/stream -> SendCall, get -> (task id,
# history length), cancel/subscribe -> task id, list -> ListCall.
Call = SendCall | ListCall | tuple[str, int | None] | str


async def read_payload(request: web.Request) -> Any:
    """The request body, parsed as JSON."""
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise RpcError(-32600, "Payload too large") from None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise RpcError(-32700, "Invalid JSON payload") from None


def request_id(payload: Any) -> str | int | None:
    """The request ``id`` when it is readable and valid, else ``None``."""
    if not isinstance(payload, dict):
        return None
    req_id = payload.get("id")
    if isinstance(req_id, bool) or not isinstance(req_id, str | int):
        return None
    return req_id


def select_wire(wires: Sequence[Wire], payload: Any) -> Wire:
    """Validate a JSON-RPC 2.0 request object; return the wire whose method it calls.

    Like a2a-sdk 1.3 in compat mode, the method name picks the version (their method names
    differ); the ``A2A-Version`` header is checked afterwards, against that version.
    """
    method = _envelope(payload)
    wire = next((w for w in wires if method in w.methods), None)
    if wire is None:
        raise RpcError(-32601, f"Method not found: {method}")
    return wire


def parse_call(wire: Wire, payload: Any) -> tuple[str, Call]:
    """The operation and call of a request :func:`select_wire` chose ``wire`` for."""
    op = wire.methods[payload["method"]]
    try:
        params = payload.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise invalid_params("params must be an object")
        if op in ("send", "stream"):
            return op, _parse_send(wire, params)
        if op == "get":
            return op, (_task_id(params), _history_length(params, "params"))
        if op == "list":
            return op, _parse_list(wire, params)
        return op, _task_id(params)
    except RpcError as err:
        raise wire.parse_error(err) from None


def _envelope(payload: Any) -> str:
    if isinstance(payload, list):
        raise RpcError(-32600, "Batch requests are not supported")
    if not isinstance(payload, dict):
        raise RpcError(-32600, "Request payload validation error: expected a JSON object")
    if payload.get("jsonrpc") != "2.0":
        raise RpcError(-32600, "Request payload validation error: 'jsonrpc' must be '2.0'")
    if "id" in payload and payload["id"] is not None and request_id(payload) is None:
        raise RpcError(-32600, "Request payload validation error: bad 'id' type")
    method = payload.get("method")
    if not isinstance(method, str) or not method:
        raise RpcError(-32600, "Request payload validation error: 'method' must be a string")
    return method


def _history_length(raw: dict[str, Any], where: str) -> int | None:
    value = raw.get("historyLength")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise invalid_params(f"{where}.historyLength must be a non-negative integer")
    return value


def _task_id(params: dict[str, Any]) -> str:
    task_id = params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise invalid_params("params.id must be a non-empty string")
    return task_id


def _parse_send(wire: Wire, params: dict[str, Any]) -> SendCall:
    message = wire.parse_message(params.get("message"))
    config = params.get("configuration") or {}
    if not isinstance(config, dict):
        raise invalid_params("params.configuration must be an object")
    accepted = config.get("acceptedOutputModes")
    if accepted is not None and not (
        isinstance(accepted, list) and all(isinstance(m, str) for m in accepted)
    ):
        raise invalid_params("acceptedOutputModes must be a list of strings")
    return SendCall(
        message=message,
        non_blocking=wire.returns_immediately(config),
        accepted=accepted,
        history_length=_history_length(config, "params.configuration"),
    )


def _parse_list(wire: Wire, params: dict[str, Any]) -> ListCall:
    state = None
    if params.get("status"):
        state = wire.parse_state(params["status"])
        if state is None:
            raise invalid_params("params.status is not a task state")
    page_size = params.get("pageSize", 50)
    if isinstance(page_size, bool) or not isinstance(page_size, int):
        raise invalid_params("params.pageSize must be an integer")
    if not 1 <= page_size <= 100:
        raise invalid_params("params.pageSize must be between 1 and 100")
    token = params.get("pageToken") or "0"
    if not isinstance(token, str) or not token.isdigit():
        raise invalid_params("params.pageToken is not a token this agent issued")
    return ListCall(
        context_id=optional_str(params, "contextId", "params"),
        state=state,
        page_size=page_size,
        offset=int(token),
        history_length=_history_length(params, "params"),
        include_artifacts=params.get("includeArtifacts") is True,
    )
