"""The values of a request that the router stores or looks up in its database, and the check
that none holds NUL (``\\u0000``).

A2A bodies may carry NUL in their content (text and data parts, metadata): it passes through
to the agent and back, JSON-escaped. The router's own tables hold text, and PostgreSQL's text
cannot hold NUL (SQLite's can, but then the two databases would differ): so a task or
context ID, a referenced task ID, a push notification config (its id, URL, token and
authentication) or a ``ListTasks`` filter holding NUL is refused with -32602 naming the field,
before anything is stored or looked up.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from router.protocol.payloads import params_error
from router.protocol.versions import Op

__all__ = ["NUL", "NUL_RULE", "check_stored", "nul_fields"]

NUL = "\x00"
NUL_RULE = "must not contain NUL (\\u0000)"
"""The description of a NUL violation (0.3 ``fieldViolations``, 1.0 ``BadRequest``)."""

# the member of a send's configuration that carries a push notification config
_PUSH_CONFIG_KEYS = ("pushNotificationConfig", "taskPushNotificationConfig")


def check_stored(op: Op, params: Mapping[str, Any]) -> None:
    """RpcError -32602 naming every field of ``params`` (already checked for their shape) that
    the router would store or look up and that holds NUL; nothing when none does."""
    fields = list(_stored_nul(op, params))
    if fields:
        raise params_error([(field, NUL_RULE) for field in fields])


def nul_fields(value: Any, field: str) -> Iterator[str]:
    """The paths under ``field`` of the strings in ``value`` (keys included) holding NUL
    (``a.b``, ``a[0]``; a NUL in a key shown as ``\\u0000``), in document order."""
    if isinstance(value, str):
        if NUL in value:
            yield field
    elif isinstance(value, Mapping):
        for key, item in value.items():
            name = str(key).replace(NUL, "\\u0000")  # a key with NUL named as JSON writes it
            path = f"{field}.{name}" if field else name
            if NUL in str(key):
                yield path
            else:
                yield from nul_fields(item, path)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from nul_fields(item, f"{field}[{index}]")


def _stored_nul(op: Op, params: Mapping[str, Any]) -> Iterator[str]:
    if op in (Op.SEND, Op.STREAM):
        message = params.get("message")
        if isinstance(message, Mapping):
            for key in ("taskId", "contextId", "referenceTaskIds"):
                yield from nul_fields(message.get(key), f"message.{key}")
        config = params.get("configuration")
        if isinstance(config, Mapping):
            for key in _PUSH_CONFIG_KEYS:
                yield from nul_fields(config.get(key), f"configuration.{key}")
    elif op in (Op.GET, Op.CANCEL, Op.SUBSCRIBE):
        yield from nul_fields(params.get("id"), "id")
    elif op is Op.PUSH_CONFIG:  # every member is the config, its task or its id
        yield from nul_fields({k: v for k, v in params.items() if k != "metadata"}, "")
    elif op is Op.LIST:
        for key in ("contextId", "pageToken"):
            yield from nul_fields(params.get(key), key)
