"""The task list: ListTasks' pages and filters over the written task rows, and the task
states of both protocol versions in their one stored (1.0) spelling.

The rows are written behind the requests (:mod:`router.ids.tasklog`); a listing first writes
this process's queue, so a process lists every task it has seen. A task list is one owner
scope's (:mod:`router.ids.owners`): it lists and counts that scope's tasks only (and, for one
version, those of the scope earlier versions gave the same caller: ``old``), and its page
tokens are refused in any other scope as tokens of no list.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, func, or_
from sqlmodel import col, select

from registry.records import as_utc, utcnow
from registry.store import Store
from router.ids.owners import owner_key, owns_task, scope_digest
from router.ids.refs import TaskRef, ref_of, valid_id
from router.ids.tasklog import TaskLog
from router.protocol.envelope import RpcError
from router.protocol.payloads import params_error
from router.protocol.versions import TASK_STATES, canonical_state
from router.tables import RouterTaskEntry

__all__ = ["MAX_PAGE_SIZE", "TaskList"]

MAX_PAGE_SIZE = 100
_TOKEN_MAX = 2048

# states are stored in the 1.0 spelling (router.protocol.versions.canonical_state)
_TERMINAL_10 = tuple(state.v1 for state in TASK_STATES if state.terminal)


class TaskList:
    """ListTasks over the task rows of every replica, of one owner scope (see
    :meth:`list_tasks`)."""

    def __init__(self, store: Store, log: TaskLog, owner: str = "", old: str | None = None) -> None:
        self.store = store
        self.log = log  # this process's queued rows, written before each listing
        self.owner = owner
        self.old = old  # the owner's scope in earlier versions, also listed
        self._scopes = {owner_key(scope): scope for scope in (owner, old) if scope is not None}

    def _owned(self) -> Any:
        """The SQL condition: a row of this list's scopes."""
        if self.old is None:
            return owns_task(self.owner)
        return or_(owns_task(self.owner), owns_task(self.old))

    def _ref(self, row: RouterTaskEntry) -> TaskRef:
        """A listed row's reference, in the scope it belongs to."""
        return ref_of(row, self._scopes.get(row.owner or "", self.owner))

    async def list_tasks(
        self,
        *,
        context_id: str | None = None,
        state: str | None = None,
        page_size: int = 50,
        page_token: str | None = None,
        agent_id: str | None = None,
        updated_after: datetime | None = None,
    ) -> tuple[list[TaskRef], str | None]:
        """One page of tasks, most recently updated first, and the token of the next page
        (None on the last page).

        ``state`` takes either version's name; ``agent_id`` keeps one agent's tasks (the
        per-agent endpoint); ``updated_after`` (an aware datetime: ListTasks'
        ``statusTimestampAfter``) keeps the tasks updated at or after it, and every task not
        in a terminal state (its agent may have moved it on since the router last saw it; a
        terminal task does not change, so the router saw its last update). A bad page size,
        filter or token raises :class:`RpcError` -32602.

        Paging is safe while tasks change: the first page fixes a snapshot time; pages walk
        the tasks last updated up to then, newest first (a keyset on (updated_at, task_id),
        which a task updated meanwhile leaves), and then the tasks updated or created since,
        oldest first from the snapshot on, each page still newest first. So no task is
        skipped (a plain keyset on the mutable updated_at skips a task updated while a
        client pages), at the price of listing a task updated during the iteration twice
        (with its newer state the second time), and of later pages holding newer tasks than
        earlier ones. The listing ends once a page catches up with the present. Times are
        the replicas' clocks: a replica whose clock lags by more than a page's round trip
        can still cause a skip.
        """
        if isinstance(page_size, bool) or not isinstance(page_size, int):
            raise _invalid("pageSize", "must be a whole number")
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise _invalid("pageSize", f"must be from 1 to {MAX_PAGE_SIZE}")
        filters = _filters(context_id, state, agent_id, updated_after)
        conditions = [self._owned(), *_conditions(filters)]
        await self.log.flush()  # this process's queued rows first
        scope = scope_digest(self.owner)
        if page_token:
            cursor = _decode_token(page_token, filters, scope)
        else:
            cursor = _Cursor(before=True, snapshot=utcnow(), at=None, task_id=None)
        updated, task = col(RouterTaskEntry.updated_at), col(RouterTaskEntry.task_id)
        older: list[RouterTaskEntry] = []
        async with self.store.session() as session:
            if cursor.before:
                query = select(RouterTaskEntry).where(*conditions, updated <= cursor.snapshot)
                if cursor.at is not None:
                    query = query.where(
                        or_(updated < cursor.at, and_(updated == cursor.at, task < cursor.task_id))
                    )
                query = query.order_by(updated.desc(), task.desc()).limit(page_size + 1)
                older = list((await session.exec(query)).all())
                if len(older) > page_size:
                    last = older[page_size - 1]
                    token = _encode_token(
                        replace(cursor, at=as_utc(last.updated_at), task_id=last.task_id),
                        filters,
                        scope,
                    )
                    return [self._ref(row) for row in older[:page_size]], token
                cursor = _Cursor(before=False, snapshot=cursor.snapshot, at=None, task_id=None)
            room = page_size - len(older)
            query = select(RouterTaskEntry).where(*conditions)
            if cursor.at is None:
                query = query.where(updated > cursor.snapshot)
            else:
                query = query.where(
                    or_(updated > cursor.at, and_(updated == cursor.at, task > cursor.task_id))
                )
            query = query.order_by(updated.asc(), task.asc()).limit(room + 1)
            newer = list((await session.exec(query)).all())
        token = None
        if len(newer) > room:
            newer = newer[:room]
            if newer:
                cursor = replace(cursor, at=as_utc(newer[-1].updated_at), task_id=newer[-1].task_id)
            token = _encode_token(cursor, filters, scope)
        return [self._ref(row) for row in [*reversed(newer), *older]], token

    async def count_tasks(
        self,
        *,
        context_id: str | None = None,
        state: str | None = None,
        agent_id: str | None = None,
        updated_after: datetime | None = None,
    ) -> int:
        """How many tasks match the filters of :meth:`list_tasks` now (``totalSize``)."""
        filters = _filters(context_id, state, agent_id, updated_after)
        await self.log.flush()
        conditions = [self._owned(), *_conditions(filters)]
        query = select(func.count()).select_from(RouterTaskEntry).where(*conditions)
        async with self.store.session() as session:
            return int((await session.exec(query)).one())


def _invalid(field: str, rule: str) -> RpcError:
    return params_error([(field, rule)])


def _filters(
    context_id: Any, state: Any, agent_id: Any, updated_after: Any = None
) -> dict[str, str | None]:
    """The checked ListTasks filters (state in its 1.0 spelling; unspecified = any; the
    time in UTC ISO 8601)."""
    for field, value in (("contextId", context_id), ("agent", agent_id)):
        if value is not None and not isinstance(value, str):
            raise _invalid(field, "must be a string")
    if state is not None and not isinstance(state, str):
        raise _invalid("status", "must be a string")
    canonical = None
    if state and state != "TASK_STATE_UNSPECIFIED":
        canonical = canonical_state(state)
        if canonical is None:
            raise _invalid("status", "must be a task state such as TASK_STATE_WORKING")
    after = None
    if updated_after is not None:
        if not isinstance(updated_after, datetime) or updated_after.tzinfo is None:
            raise _invalid("statusTimestampAfter", "must be a timestamp with a time zone")
        after = updated_after.astimezone(UTC).isoformat()
    return {"c": context_id or None, "s": canonical, "a": agent_id or None, "f": after}


def _conditions(filters: dict[str, str | None]) -> list[Any]:
    out: list[Any] = []
    if filters["c"]:
        out.append(col(RouterTaskEntry.context_id) == filters["c"])
    if filters["s"]:
        out.append(col(RouterTaskEntry.state) == filters["s"])
    if filters["a"]:
        out.append(col(RouterTaskEntry.agent_id) == filters["a"])
    if filters["f"]:
        state = col(RouterTaskEntry.state)
        out.append(
            or_(
                col(RouterTaskEntry.updated_at) >= datetime.fromisoformat(filters["f"]),
                state.is_(None),
                state.not_in(_TERMINAL_10),
            )
        )
    return out


@dataclass(frozen=True)
class _Cursor:
    """Where a ListTasks iteration is: among the tasks updated up to ``snapshot`` (newest
    first, ``before``) or after it (oldest first), past (``at``, ``task_id``)."""

    before: bool
    snapshot: datetime
    at: datetime | None
    task_id: str | None


def _encode_token(cursor: _Cursor, filters: dict[str, str | None], scope: str) -> str:
    """An opaque page token: the cursor, and the filters and scope (its digest; no member
    for the anonymous scope) it was made for."""
    data: dict[str, Any] = {
        "b": cursor.before,
        "n": cursor.snapshot.isoformat(),
        "u": cursor.at.isoformat() if cursor.at else None,
        "t": cursor.task_id,
        **filters,
    }
    if scope:
        data["o"] = scope
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _decode_token(token: Any, filters: dict[str, str | None], scope: str) -> _Cursor:
    """The cursor in a token made by :func:`_encode_token` for the same filters and scope (a
    token of another scope is no token of this list)."""
    foreign = _invalid("pageToken", "is not a page token of this list")
    if not isinstance(token, str) or len(token) > _TOKEN_MAX:
        raise foreign
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if (
            not isinstance(data, dict)
            or data.pop("o", "") != scope
            or set(data) != {"b", "n", "u", "t", *filters}
            or not isinstance(data["b"], bool)
            or not isinstance(data["n"], str)
            or (data["u"] is None) != (data["t"] is None)
            or (data["b"] and data["u"] is None)
            or (data["u"] is not None and not isinstance(data["u"], str))
            or (data["t"] is not None and not valid_id(data["t"]))
        ):
            raise foreign
        snapshot = datetime.fromisoformat(data["n"])
        at = datetime.fromisoformat(data["u"]) if data["u"] is not None else None
    except (binascii.Error, ValueError, RecursionError):
        raise foreign from None
    if snapshot.tzinfo is None or (at is not None and at.tzinfo is None):
        raise foreign
    if any(data[key] != value for key, value in filters.items()):
        raise _invalid(
            "pageToken", "was made for other filters (contextId, status, statusTimestampAfter)"
        )
    return _Cursor(
        before=data["b"],
        snapshot=snapshot.astimezone(UTC),
        at=at.astimezone(UTC) if at else None,
        task_id=data["t"],
    )
