"""The params of a 1.0 ``ListTasks`` call, checked, and its ``statusTimestampAfter`` filter."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from router.protocol.payloads import (
    check_history_length,
    int_param,
    json_type,
    params_error,
    shown,
)
from router.protocol.timestamps import parse_timestamp, status_timestamp
from router.protocol.versions import STATES

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "ListQuery",
    "list_tasks_query",
    "status_at_or_after",
]

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100


@dataclass(frozen=True)
class ListQuery:
    """The checked params of a 1.0 ``ListTasks`` call."""

    context_id: str | None = None
    status: str | None = None  # a 1.0 state name; None: any
    page_size: int = DEFAULT_PAGE_SIZE
    page_token: str | None = None
    history_length: int | None = None
    include_artifacts: bool = False
    # statusTimestampAfter, parsed (timezone-aware, UTC); see :func:`status_at_or_after`
    status_timestamp_after: datetime | None = None


def list_tasks_query(params: Mapping[str, Any]) -> ListQuery:
    """Check the params of ``ListTasks`` (1.0 only); -32602 with every violation."""
    violations: list[tuple[str, str]] = []
    for key in ("contextId", "pageToken", "statusTimestampAfter"):
        value = params.get(key)
        if value is not None and not isinstance(value, str):
            violations.append((key, f"must be a string, not {json_type(value)}"))
    stamp = params.get("statusTimestampAfter")
    after = parse_timestamp(stamp) if isinstance(stamp, str) and stamp else None
    if isinstance(stamp, str) and stamp and after is None:
        rule = "must be an RFC 3339 timestamp such as 2026-01-02T03:04:05Z"
        violations.append(("statusTimestampAfter", f"{rule}, got {shown(stamp)}"))
    status = params.get("status")
    if status in (None, "", "TASK_STATE_UNSPECIFIED"):
        status = None
    elif status not in STATES["1.0"]:
        allowed = ", ".join(STATES["1.0"][:-1])
        violations.append(("status", f"must be one of {allowed}; got {status!r}"))
    page_size = _page_size(params.get("pageSize"), violations)
    history_length = check_history_length(params, "historyLength", violations)
    include = params.get("includeArtifacts", False)
    if not isinstance(include, bool):
        violations.append(("includeArtifacts", f"must be a boolean, not {json_type(include)}"))
    if violations:
        raise params_error(violations)
    return ListQuery(
        context_id=params.get("contextId") or None,
        status=status,
        page_size=page_size,
        page_token=params.get("pageToken") or None,
        history_length=history_length,
        include_artifacts=include,
        status_timestamp_after=after,
    )


def status_at_or_after(task: Mapping[str, Any], after: datetime) -> bool:
    """Whether a task passes ListTasks' ``statusTimestampAfter`` (as the official SDK's task
    stores do: a status timestamp at or after it; a task without one does not pass)."""
    stamp = status_timestamp(task)
    return stamp is not None and stamp >= after


def _page_size(value: Any, violations: list[tuple[str, str]]) -> int:
    if value is None:
        return DEFAULT_PAGE_SIZE
    size = int_param(value)
    if size == 0:  # proto3 default: unset
        return DEFAULT_PAGE_SIZE
    if size is None or not 1 <= size <= MAX_PAGE_SIZE:
        violations.append(
            ("pageSize", f"must be between 1 and {MAX_PAGE_SIZE} inclusive, got {value!r}")
        )
        return DEFAULT_PAGE_SIZE
    return size
