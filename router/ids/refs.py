"""What the router knows about one of its task IDs (:class:`TaskRef`: its agent, upstream
IDs, context, last known state and owner scope), and the check every router and upstream ID
passes (non-empty, at most :data:`MAX_ID_LENGTH` characters, no NUL)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from registry.records import as_utc
from router.ids.tasklog import TaskWrite
from router.protocol.payloads import MAX_ID_LENGTH
from router.tables import RouterTaskEntry

__all__ = ["TaskRef", "check_id", "ref_of", "valid_id"]


@dataclass(frozen=True)
class TaskRef:
    """What the router knows about one of its task IDs."""

    task_id: str
    agent_id: str
    upstream_task_id: str
    context_id: str | None
    state: str | None  # last known, 1.0 spelling (see router.protocol.versions.canonical_state)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    owner: str = ""  # the owner scope (router.ids.owners); "" the anonymous one


def ref_of(row: RouterTaskEntry | TaskWrite, owner: str | None = None) -> TaskRef:
    """The reference of a task-list row, written or queued (times in UTC). ``owner`` is the
    scope it was found in (a row stores only :func:`router.ids.owners.owner_key` of it);
    by default a queued row's own, a written row's stored owner."""
    if owner is None:
        owner = row.owner or ""
    return TaskRef(
        task_id=row.task_id,
        agent_id=row.agent_id,
        upstream_task_id=row.upstream_task_id,
        context_id=row.context_id,
        state=row.state,
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
        owner=owner,
    )


def valid_id(value: Any) -> bool:
    """Whether ``value`` can be an ID: a non-empty string of at most MAX_ID_LENGTH, without
    NUL (PostgreSQL's text cannot hold it: such an ID is never stored nor looked up)."""
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_LENGTH and "\x00" not in value


def check_id(value: Any, what: str) -> None:
    """Raise ValueError naming ``what`` unless :func:`valid_id`."""
    if not valid_id(value):
        raise ValueError(
            f"{what} must be a non-empty string of at most {MAX_ID_LENGTH} characters, without NUL"
        )
