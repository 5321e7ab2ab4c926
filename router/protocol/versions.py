"""The A2A versions the router speaks, and the names each gives methods, task states and roles.

One table per concept, each with a row per thing and a column per spelling:

- methods: 0.3 and 1.0 names of each :class:`Op` (:data:`METHODS`), the v0.1 draft's
  (:data:`V01_METHODS`) and the ``A2A.``-prefixed draft's (:data:`PREFIX`,
  :data:`PREFIXED_ALIASES`);
- task states (:data:`TASK_STATES`): 0.3 name, 1.0 name, proto enum number, v0.1 name;
- roles (:data:`ROLE_TABLE`): 0.3 name, 1.0 name, proto enum number, the prefixed draft's name.

The protocol version of a call is the ``A2A-Version`` header (empty means 0.3, see
:func:`client_version`); an agent interface's is its ``protocolVersion`` (:func:`version_of`).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, Literal, NamedTuple

from router.protocol.errors import VERSION_NOT_SUPPORTED, RpcError

__all__ = [
    "EXTENDED_CARD_METHODS",
    "METHODS",
    "PREFIX",
    "PREFIXED_ALIASES",
    "ROLES",
    "ROLE_NUMBERS",
    "ROLE_TABLE",
    "STATES",
    "TASK_STATES",
    "V01_METHODS",
    "V01_ONLY_METHODS",
    "VERSIONS",
    "VERSION_HEADER",
    "Dialect",
    "Op",
    "Role",
    "TaskState",
    "Version",
    "canonical_state",
    "client_version",
    "equivalent_method",
    "is_interrupted_state",
    "is_terminal_state",
    "method_name",
    "role_name",
    "state_name",
    "task_state",
    "version_of",
]

Version = Literal["0.3", "1.0"]
VERSIONS: tuple[Version, ...] = ("0.3", "1.0")
# What a client speaks: a version, or a legacy dialect served as one (router.compat).
Dialect = Literal["0.3", "1.0", "0.1", "1.0-prefixed"]
VERSION_HEADER = "A2A-Version"


# --- methods --------------------------------------------------------------------------------


class Op(StrEnum):
    """What a method does, the same in both versions."""

    SEND = "send"
    STREAM = "stream"
    GET = "get"
    CANCEL = "cancel"
    SUBSCRIBE = "subscribe"
    LIST = "list"
    PUSH_CONFIG = "push-config"  # any push-notification-config method
    CARD = "card"  # A2A v0.1 agent/getCard (router.compat.v01)
    EXTENDED_CARD = "extended-card"  # GetExtendedAgentCard, agent/getAuthenticatedExtendedCard


# (0.3 name, 1.0 name, op); None where a version has no such method.
_METHOD_PAIRS: tuple[tuple[str | None, str | None, Op], ...] = (
    ("message/send", "SendMessage", Op.SEND),
    ("message/stream", "SendStreamingMessage", Op.STREAM),
    ("tasks/get", "GetTask", Op.GET),
    (None, "ListTasks", Op.LIST),
    ("tasks/cancel", "CancelTask", Op.CANCEL),
    ("tasks/resubscribe", "SubscribeToTask", Op.SUBSCRIBE),
    ("tasks/pushNotificationConfig/set", "CreateTaskPushNotificationConfig", Op.PUSH_CONFIG),
    ("tasks/pushNotificationConfig/get", "GetTaskPushNotificationConfig", Op.PUSH_CONFIG),
    ("tasks/pushNotificationConfig/list", "ListTaskPushNotificationConfigs", Op.PUSH_CONFIG),
    ("tasks/pushNotificationConfig/delete", "DeleteTaskPushNotificationConfig", Op.PUSH_CONFIG),
)

METHODS: dict[Version, dict[str, Op]] = {
    "0.3": {old: op for old, _, op in _METHOD_PAIRS if old},
    "1.0": {new: op for _, new, op in _METHOD_PAIRS if new},
}

# The extended card methods, per version: answered by the router itself (the router's card
# for the caller), never forwarded.
EXTENDED_CARD_METHODS: dict[str, Version] = {
    "agent/getAuthenticatedExtendedCard": "0.3",
    "GetExtendedAgentCard": "1.0",
}

# A2A v0.1 (the tasks/send draft): method -> (op, the 0.3 method it is served as)
V01_METHODS: dict[str, tuple[Op, str | None]] = {
    "tasks/send": (Op.SEND, "message/send"),
    "tasks/sendSubscribe": (Op.STREAM, "message/stream"),
    "tasks/get": (Op.GET, "tasks/get"),
    "tasks/cancel": (Op.CANCEL, "tasks/cancel"),
    "tasks/resubscribe": (Op.SUBSCRIBE, "tasks/resubscribe"),
    "tasks/pushNotification/set": (Op.PUSH_CONFIG, "tasks/pushNotificationConfig/set"),
    "tasks/pushNotification/get": (Op.PUSH_CONFIG, "tasks/pushNotificationConfig/get"),
    "agent/getCard": (Op.CARD, None),
}
# the names that exist only in v0.1 (the others are 0.3 names too)
V01_ONLY_METHODS = frozenset(name for name in V01_METHODS if name not in METHODS["0.3"])

# The A2A.-prefixed 1.0 draft: "A2A." + a 1.0 method name, or one of these draft names.
PREFIX = "A2A."
PREFIXED_ALIASES = {  # the draft's names that differ from 1.0 beyond the prefix
    "ListTaskPushNotificationConfig": "ListTaskPushNotificationConfigs",
}


def method_name(version: Version, op: Op) -> str:
    """The method of ``version`` for ``op``; ValueError for PUSH_CONFIG (several) or a gap."""
    names = [name for name, method_op in METHODS[version].items() if method_op == op]
    if len(names) != 1:
        raise ValueError(f"A2A {version} has {len(names)} methods for {op.value!r}")
    return names[0]


def equivalent_method(method: str, to_version: Version) -> str | None:
    """The name of ``method`` (of either version) in ``to_version``; None if it has none."""
    for old, new, _ in _METHOD_PAIRS:
        if method in (old, new):
            return old if to_version == "0.3" else new
    return None


# --- task states ----------------------------------------------------------------------------


class TaskState(NamedTuple):
    """One task state in every spelling.

    ``v01`` is the v0.1 name; v0.1 has no auth-required and no rejected, which it is told
    as the nearest state it has (input-required, failed), losing the difference.
    """

    v03: str
    v1: str
    number: int  # the proto enum number (1.0 ProtoJSON may send it)
    v01: str
    terminal: bool = False  # nothing follows
    interrupted: bool = False  # the task waits for the client


# In the 0.3 specification's order (error messages list them so).
TASK_STATES: tuple[TaskState, ...] = (
    TaskState("submitted", "TASK_STATE_SUBMITTED", 1, "submitted"),
    TaskState("working", "TASK_STATE_WORKING", 2, "working"),
    TaskState("input-required", "TASK_STATE_INPUT_REQUIRED", 6, "input-required", interrupted=True),
    TaskState("auth-required", "TASK_STATE_AUTH_REQUIRED", 8, "input-required", interrupted=True),
    TaskState("completed", "TASK_STATE_COMPLETED", 3, "completed", terminal=True),
    TaskState("canceled", "TASK_STATE_CANCELED", 5, "canceled", terminal=True),
    TaskState("failed", "TASK_STATE_FAILED", 4, "failed", terminal=True),
    TaskState("rejected", "TASK_STATE_REJECTED", 7, "failed", terminal=True),
    TaskState("unknown", "TASK_STATE_UNSPECIFIED", 0, "unknown"),
)
STATES: dict[Version, tuple[str, ...]] = {
    "0.3": tuple(state.v03 for state in TASK_STATES),
    "1.0": tuple(state.v1 for state in TASK_STATES),
}
_STATE_BY_NAME = {state.v03: state for state in TASK_STATES} | {
    state.v1: state for state in TASK_STATES
}
_STATE_BY_NUMBER = {state.number: state for state in TASK_STATES}


def task_state(state: Any) -> TaskState | None:
    """The row of ``state``: a 0.3 or 1.0 name, or a 1.0 enum number; None for anything else."""
    if isinstance(state, str):
        return _STATE_BY_NAME.get(state)
    if isinstance(state, int) and not isinstance(state, bool):
        return _STATE_BY_NUMBER.get(state)
    return None


def state_name(version: Version, state: str) -> str:
    """``state`` (either version's spelling) in ``version``'s spelling; unknown: unchanged."""
    row = _STATE_BY_NAME.get(state)
    if row is None:
        return state
    return row.v03 if version == "0.3" else row.v1


def canonical_state(state: str | None) -> str | None:
    """A task state of either version in its 1.0 spelling (``working`` ->
    ``TASK_STATE_WORKING``); None for anything else."""
    row = _STATE_BY_NAME.get(state) if isinstance(state, str) else None
    return row.v1 if row is not None else None


def is_terminal_state(version: Version, state: str | None) -> bool:
    """completed, canceled, failed, rejected, in either spelling."""
    row = _STATE_BY_NAME.get(state) if isinstance(state, str) else None
    return row is not None and row.terminal


def is_interrupted_state(version: Version, state: str | None) -> bool:
    """input-required or auth-required, in either spelling: the task waits for the client."""
    row = _STATE_BY_NAME.get(state) if isinstance(state, str) else None
    return row is not None and row.interrupted


# --- roles ----------------------------------------------------------------------------------


class Role(NamedTuple):
    """One message role in every spelling (v0.1 spells it as 0.3 does)."""

    v03: str
    v1: str
    number: int  # the proto enum number (1.0 ProtoJSON may send it)
    draft: str  # the A2A.-prefixed draft's


ROLE_TABLE: tuple[Role, ...] = (
    Role("user", "ROLE_USER", 1, "user"),
    Role("agent", "ROLE_AGENT", 2, "agent"),
)
ROLES: dict[Version, tuple[str, ...]] = {  # per version: (user, agent)
    "0.3": tuple(role.v03 for role in ROLE_TABLE),
    "1.0": tuple(role.v1 for role in ROLE_TABLE),
}
ROLE_NUMBERS = tuple(role.number for role in ROLE_TABLE)
_ROLE_INTO: dict[Version, dict[Any, str]] = {  # the other version's spellings -> version's
    "1.0": {role.v03: role.v1 for role in ROLE_TABLE},
    "0.3": {role.v1: role.v03 for role in ROLE_TABLE}
    | {role.number: role.v03 for role in ROLE_TABLE},
}


def role_name(version: Version, role: Any) -> Any:
    """A role of the other version (1.0 enum numbers too) in ``version``'s spelling; anything
    else unchanged."""
    if isinstance(role, bool) or not isinstance(role, str | int):
        return role
    return _ROLE_INTO[version].get(role, role)


# --- versions -------------------------------------------------------------------------------

_VERSION_RE = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.\d+)?$")


def _major_minor(text: str) -> tuple[int, int] | None:
    found = _VERSION_RE.match(text.strip())
    if found is None:
        return None
    return int(found.group(1)), int(found.group(2) or 0)


def client_version(header_value: str | None) -> Version:
    """The version a client asks for in ``A2A-Version``: none or empty means 0.3.

    Patch numbers are ignored (``0.3.0`` is 0.3, ``1`` and ``1.0.1`` are 1.0); anything
    else raises :class:`RpcError` ``-32009`` naming the supported versions.
    """
    if header_value is None or not header_value.strip():
        return "0.3"
    parsed = _major_minor(header_value)
    if parsed == (0, 3):
        return "0.3"
    if parsed == (1, 0):
        return "1.0"
    raise RpcError(
        VERSION_NOT_SUPPORTED,
        f"A2A-Version {header_value.strip()!r} is not supported: Switchboard speaks A2A 1.0 "
        "(send A2A-Version: 1.0) and A2A 0.3 (send no A2A-Version header, or 0.3)",
        {"requestedVersion": header_value.strip(), "supportedVersions": list(VERSIONS)},
    )


def version_of(protocol_version: str) -> Version | None:
    """The router version of an agent interface's ``protocolVersion``: 0.x is "0.3"."""
    parsed = _major_minor(protocol_version) if isinstance(protocol_version, str) else None
    if parsed is None:
        return None
    if parsed[0] == 0:
        return "0.3"
    if parsed == (1, 0):
        return "1.0"
    return None
