"""The audit log: every admin write, who made it, what it was, when, and how it ended.

:func:`audit_middleware` records each write under ``/api/v1/`` (any method but ``GET``,
``HEAD`` and ``OPTIONS``, except the POSTs that only read, :data:`registry.api.READ_POSTS`)
after its handler, also when the handler failed (with the error's status). It sits after the
authentication middleware, so a request refused for its credentials is not recorded (the
access log has it): every entry names an authenticated caller. :class:`Audit` keeps the
entries in ``audit_log`` and lists them newest first (``GET /api/v1/audit``).

What is recorded: the caller's :meth:`~registry.access.principal.Principal.label`, subject and
tenant, the method and path, the action (method and route template, e.g. ``DELETE
/api/v1/agents/{agent_id}``), the target (the ids in the path; for a route that creates
something, the id its ``Location`` names), the HTTP status and small details (``created``: the
``Location`` of what was made; ``error``: the error code). Never a request body nor a query
string: they may hold secrets (outbound credentials, cards).

A failure to write an entry is logged and the request's answer stands (log and continue): the
change is already made when the entry is written, and refusing the answer would not undo it.
An operator who needs a complete trail watches for ``audit entry not written`` in the logs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiohttp import web
from sqlmodel import col, select

from registry.access.principal import ANONYMOUS, PRINCIPAL_KEY, Principal
from registry.api import READ_POSTS
from registry.errors import RegistryError
from registry.openapi import PREFIX
from registry.paging import Page, decode_cursor, encode_cursor
from registry.records import as_utc, iso, utcnow
from registry.store import Store
from registry.tables import AuditRow
from registry.writebatch import WriteBatcher

__all__ = ["AUDIT", "Audit", "AuditEntry", "audit_middleware", "is_audited"]

log = logging.getLogger(__name__)

MAX_PATH = 2048
MAX_TARGET = 1024

_READS = frozenset({"GET", "HEAD", "OPTIONS"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class AuditEntry:
    """One recorded admin write."""

    id: int
    at: datetime
    actor: str
    subject: str | None
    tenant: str | None
    method: str
    path: str
    action: str
    target: str | None
    status: int
    details: dict[str, Any] | None

    def to_api(self) -> dict[str, Any]:
        """The admin API's view."""
        return {
            "id": self.id,
            "at": iso(self.at),
            "actor": self.actor,
            "subject": self.subject,
            "tenant": self.tenant,
            "method": self.method,
            "path": self.path,
            "action": self.action,
            "target": self.target,
            "status": self.status,
            "details": self.details,
        }


def _entry(row: AuditRow) -> AuditEntry:
    assert row.id is not None
    return AuditEntry(
        id=row.id,
        at=as_utc(row.at),
        actor=row.actor,
        subject=row.subject,
        tenant=row.tenant,
        method=row.method,
        path=row.path,
        action=row.action,
        target=row.target,
        status=row.status,
        details=row.details,
    )


class Audit:
    """The ``audit_log`` table: append entries, list them newest first."""

    def __init__(self, store: Store, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.store = store
        self.clock = clock
        self._writes: WriteBatcher[AuditRow, AuditEntry] = WriteBatcher(self._write)

    async def record(
        self,
        principal: Principal,
        *,
        method: str,
        path: str,
        action: str,
        status: int,
        target: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> AuditEntry:
        """Append one entry for a write by ``principal``; its time is now."""
        row = AuditRow(
            at=self.clock(),
            actor=principal.label()[:512],
            subject=principal.subject[:256] if principal.authenticated else None,
            tenant=principal.tenant[:256] if principal.tenant else None,
            method=method[:16],
            path=path[:MAX_PATH],
            action=action[:512],
            target=None if target is None else target[:MAX_TARGET],
            status=status,
            details=dict(details) if details else None,
        )
        return await self._writes.submit(row)

    async def _write(self, rows: Sequence[AuditRow]) -> list[AuditEntry | BaseException]:
        """Entries recorded while another transaction was open are written in one; if that
        fails, each is tried alone, so only a bad one fails."""
        try:
            async with self.store.session() as session, session.begin():
                session.add_all(rows)
                await session.flush()
            return [_entry(row) for row in rows]
        except Exception:
            if len(rows) == 1:
                raise
        outcomes: list[AuditEntry | BaseException] = []
        for row in rows:
            row.id = None  # the failed flush may have given it one
            try:
                outcomes.extend(await self._write([row]))
            except Exception as exc:
                outcomes.append(exc)
        return outcomes

    async def list(
        self,
        limit: int = 50,
        cursor: str | None = None,
        *,
        actor: str | None = None,
        since: datetime | None = None,
        action: str | None = None,
    ) -> Page[AuditEntry]:
        """A page of entries, newest first: ``actor`` matches an entry's actor label or its
        subject, ``since`` keeps entries at or after that time, ``action`` is exact (``POST
        /api/v1/agents``); ``cursor`` is the previous page's ``next_cursor``."""
        scope = "audit:" + json.dumps([actor, None if since is None else iso(since), action])
        query = select(AuditRow)
        if actor is not None:
            query = query.where((col(AuditRow.actor) == actor) | (col(AuditRow.subject) == actor))
        if since is not None:
            query = query.where(col(AuditRow.at) >= as_utc(since))
        if action is not None:
            query = query.where(col(AuditRow.action) == action)
        if cursor:
            (before,) = decode_cursor(cursor, scope, (int,))
            query = query.where(col(AuditRow.id) < before)
        query = query.order_by(col(AuditRow.id).desc()).limit(limit + 1)
        async with self.store.session() as session:
            rows = (await session.exec(query)).all()
        items = [_entry(row) for row in rows[:limit]]
        more = len(rows) > limit and items
        return Page(items, encode_cursor(scope, [items[-1].id]) if more else None)


AUDIT = web.AppKey("audit", Audit)


def is_audited(method: str, path: str) -> bool:
    """Whether a request is an admin write the audit log records."""
    return method not in _READS and path.startswith(PREFIX + "/") and path not in READ_POSTS


@web.middleware
def audit_middleware(request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
    """Record every admin write after its handler (with the error's status when it raised,
    then re-raise); a failure to record is logged, the answer stands. Other requests run as
    they are (no frame of this middleware held while they run)."""
    if (
        not is_audited(request.method, request.path)
        or request.match_info.http_exception is not None  # no such route or method
        or AUDIT not in request.app
    ):
        return handler(request)
    return _audited(request, handler)


async def _audited(request: web.Request, handler: Handler) -> web.StreamResponse:
    """``handler``, then its record."""
    try:
        response = await handler(request)
    except RegistryError as exc:
        await _record(request, exc.status, {"error": exc.code})
        raise
    except web.HTTPException as exc:
        await _record(request, exc.status, {})
        raise
    except Exception:
        await _record(request, 500, {"error": "internal_error"})
        raise
    details = {}
    location = response.headers.get("Location")
    if location and location.startswith(PREFIX + "/"):
        details["created"] = location[:MAX_TARGET]
    await _record(request, response.status, details)
    return response


async def _record(request: web.Request, status: int, details: dict[str, Any]) -> None:
    route = request.match_info.route
    template = route.resource.canonical if route.resource is not None else request.path
    target = "/".join(request.match_info.values()) or None
    if target is None and "created" in details:
        target = details["created"].rsplit("/", 1)[-1]
    try:
        await request.app[AUDIT].record(
            request.get(PRINCIPAL_KEY, ANONYMOUS),
            method=request.method,
            path=request.path,
            action=f"{request.method} {template}",
            status=status,
            target=target,
            details=details or None,
        )
    except Exception:
        log.exception(
            "audit entry not written for %s %s (status %d)", request.method, request.path, status
        )
