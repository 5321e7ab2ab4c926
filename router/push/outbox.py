"""The durable outbox of push notifications: every notification is a row before it is sent.

:meth:`Outbox.enqueue` writes a row (``pending``); :meth:`Outbox.deliver_due` claims the due
rows with a lease (a conditional update: of several replicas exactly one takes a row, and a
row whose replica died is taken again when its lease ends), POSTs each to the client's
webhook and records the outcome: ``delivered`` on a 2xx answer; otherwise another attempt
after an exponential backoff with jitter, or ``dead`` once the retry budget is spent (listed
by :meth:`Outbox.dead`, the admin route ``GET /api/v1/push/dead``). Of one task only the
oldest pending row is ever due, so a task's notifications arrive in order. Redirects are not
followed (a 3xx is a failed attempt); addresses are checked as they are connected to
(``SWITCHBOARD_PUSH_ALLOW_NETWORKS``), or judged before a delivery goes through the outbound
proxy (``proxy``); at most ``per_webhook`` deliveries run at once per webhook host. With
:attr:`Outbox.box` set (``SWITCHBOARD_SECRET_KEY``) the headers that carry the client's token
and credentials are stored encrypted, as the configs are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import aiohttp
from sqlalchemy import and_, exists, or_, update
from sqlalchemy.orm import aliased
from sqlmodel import col, select
from yarl import URL

from registry.access.secrets import SecretBox, SecretError
from registry.egress import OutboundProxy
from registry.netguard import AddressPolicy, redact_url
from registry.outbound import outbound_connector, outbound_middlewares
from registry.records import as_utc, iso, utcnow
from registry.store import Store
from router.push.configs import PushConfig, seal, unseal
from router.tables import PushOutboxRow

__all__ = ["Backoff", "Outbox", "notification_headers"]

log = logging.getLogger(__name__)

TOKEN_HEADER = "X-A2A-Notification-Token"
_BATCH = 64
_SECRET_HEADERS = (TOKEN_HEADER, "Authorization")


@dataclass(frozen=True)
class Backoff:
    """The retry schedule: attempt n (1-based) failed -> wait ``base * 2**(n-1)`` seconds
    (at most ``cap``), times a jitter factor in [0.5, 1); ``attempts`` in all, then dead."""

    base: float = 1.0
    cap: float = 300.0
    attempts: int = 8

    def delay(self, failed: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds before the next attempt after ``failed`` failed attempts."""
        return min(self.cap, self.base * 2 ** (failed - 1)) * (0.5 + rand() / 2)


def notification_headers(config: PushConfig) -> dict[str, str]:
    """The headers a notification for ``config`` carries: the client's token as
    ``X-A2A-Notification-Token``, its ``authentication`` (scheme and credentials) as
    ``Authorization``."""
    headers = {"Content-Type": "application/json"}
    if config.token:
        headers[TOKEN_HEADER] = config.token
    auth = config.authentication or {}
    scheme, credentials = auth.get("scheme"), auth.get("credentials")
    if isinstance(scheme, str) and scheme and isinstance(credentials, str) and credentials:
        headers["Authorization"] = f"{scheme} {credentials}"
    return headers


class Outbox:
    """The ``router_push_outbox`` table and its delivery."""

    def __init__(
        self,
        store: Store,
        policy: AddressPolicy,
        *,
        backoff: Backoff = Backoff(),
        clock: Callable[[], datetime] = utcnow,
        rand: Callable[[], float] = random.random,
        lease: float = 60.0,
        timeout: float = 10.0,
        per_webhook: int = 4,
        proxy: OutboundProxy | None = None,
    ) -> None:
        self.store = store
        self.policy = policy
        self.backoff = backoff
        self.clock = clock
        self.rand = rand
        self.lease = lease
        self.timeout = timeout
        self.per_webhook = per_webhook
        self.proxy = proxy  # SWITCHBOARD_OUTBOUND_PROXY (webhooks judged by the push guard)
        self.holder = uuid.uuid4().hex
        self.box: SecretBox | None = None  # set at start from SWITCHBOARD_SECRET_KEY
        self.wake = asyncio.Event()  # set by enqueue: the loop delivers at once
        self.stopping = False  # set by stop(): the loop ends after its round
        self._session: aiohttp.ClientSession | None = None
        self._limits: dict[str, asyncio.Semaphore] = {}

    async def start(self) -> None:
        """Open the HTTP client (guarded resolver, the outbound proxy, no proxy variables of
        the environment, no cookies)."""
        self._session = aiohttp.ClientSession(
            connector=outbound_connector(self.policy, self.proxy),
            middlewares=outbound_middlewares(self.proxy, self.policy),
            timeout=aiohttp.ClientTimeout(total=self.timeout),
            trust_env=False,
            cookie_jar=aiohttp.DummyCookieJar(),
        )

    async def close(self) -> None:
        """Close the HTTP client and give up this replica's leases (a clean stop: the rows
        it was delivering are taken over at once, not when the lease ends)."""
        try:
            async with self.store.session() as session, session.begin():
                await session.exec(  # type: ignore[call-overload]
                    update(PushOutboxRow)
                    .where(col(PushOutboxRow.leased_by) == self.holder)
                    .where(col(PushOutboxRow.state) == "pending")
                    .values(lease_until=None, leased_by=None)
                )
        except Exception:  # the database is gone: the leases end by themselves
            log.warning("push outbox: leases not released at stop", exc_info=True)
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def enqueue(self, config: PushConfig, body: dict[str, Any]) -> int:
        """Store one notification for ``config``'s webhook; its row id."""
        now = self.clock()
        row = PushOutboxRow(
            task_id=config.task_id,
            config_id=config.config_id,
            url=config.url,
            headers={
                name: (seal(self.box, value) or "") if name in _SECRET_HEADERS else value
                for name, value in notification_headers(config).items()
            },
            body=body,
            next_at=now,
            created_at=now,
            updated_at=now,
        )
        async with self.store.session() as session, session.begin():
            session.add(row)
            await session.flush()
            row_id = row.id
        self.wake.set()
        assert row_id is not None
        return row_id

    @staticmethod
    def _blocked() -> Any:
        """Whether an earlier row of the same task is still pending."""
        earlier = aliased(PushOutboxRow)
        return exists().where(
            and_(
                earlier.task_id == PushOutboxRow.task_id,
                earlier.state == "pending",
                earlier.id < PushOutboxRow.id,
            )
        )

    async def _due(self, now: datetime) -> list[PushOutboxRow]:
        blocked = self._blocked()
        query = (
            select(PushOutboxRow)
            .where(col(PushOutboxRow.state) == "pending")
            .where(col(PushOutboxRow.next_at) <= now)
            .where(
                or_(col(PushOutboxRow.lease_until).is_(None), col(PushOutboxRow.lease_until) <= now)
            )
            .where(~blocked)
            .order_by(col(PushOutboxRow.id))
            .limit(_BATCH)
        )
        async with self.store.session() as session:
            return list((await session.exec(query)).all())

    async def claim(self) -> list[PushOutboxRow]:
        """Take the due rows (the oldest pending one of each task) for :attr:`lease` seconds."""
        now = self.clock()
        until = now + timedelta(seconds=self.lease)
        taken = []
        for row in await self._due(now):
            async with self.store.session() as session, session.begin():
                result = await session.exec(  # type: ignore[call-overload]
                    update(PushOutboxRow)
                    .where(col(PushOutboxRow.id) == row.id)
                    .where(col(PushOutboxRow.state) == "pending")
                    .where(
                        or_(
                            col(PushOutboxRow.lease_until).is_(None),
                            col(PushOutboxRow.lease_until) <= now,
                        )
                    )
                    .values(lease_until=until, leased_by=self.holder)
                )
            if result.rowcount == 1:
                taken.append(row)
        return taken

    async def deliver_due(self) -> int:
        """One round: claim the due rows and try each once; how many were tried."""
        rows = await self.claim()
        await asyncio.gather(*(self._attempt(row) for row in rows))
        return len(rows)

    async def _attempt(self, row: PushOutboxRow) -> None:
        host = URL(row.url).host or ""
        limit = self._limits.setdefault(host, asyncio.Semaphore(self.per_webhook))
        async with limit:
            problem = await self._post(row)
        await self._record(row, problem)

    async def _post(self, row: PushOutboxRow) -> str | None:
        """POST the row; None when the webhook took it (2xx), else what went wrong."""
        if self._session is None:
            await self.start()
        assert self._session is not None
        try:
            headers = {name: unseal(self.box, value) or "" for name, value in row.headers.items()}
        except SecretError as exc:
            return str(exc)[:500]
        try:
            async with self._session.post(
                row.url, json=row.body, headers=headers, allow_redirects=False
            ) as resp:
                await resp.read()
                if 200 <= resp.status < 300:
                    return None
                if 300 <= resp.status < 400:
                    return f"HTTP {resp.status}: redirects are not followed"
                return f"HTTP {resp.status}"
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}"[:500]

    async def _record(self, row: PushOutboxRow, problem: str | None) -> None:
        now = self.clock()
        attempts = row.attempts + 1
        values: dict[str, Any] = {
            "attempts": attempts, "lease_until": None, "leased_by": None, "updated_at": now,
        }  # fmt: skip
        if problem is None:
            values["state"] = "delivered"
        elif attempts >= self.backoff.attempts:
            values |= {"state": "dead", "last_error": problem}
            log.warning("push notification %s to %s is dead: %s", row.id, redact_url(row.url),
                        problem)  # fmt: skip
        else:
            delay = self.backoff.delay(attempts, self.rand)
            values |= {"next_at": now + timedelta(seconds=delay), "last_error": problem}
        async with self.store.session() as session, session.begin():
            await session.exec(  # type: ignore[call-overload]
                update(PushOutboxRow)
                .where(col(PushOutboxRow.id) == row.id)
                .where(col(PushOutboxRow.leased_by) == self.holder)
                .values(**values)
            )

    async def next_due(self) -> datetime | None:
        """When the soonest row another round could claim is due (its retry time, or the end
        of another replica's lease), or None. Rows held back by an earlier one of their task
        are not counted: they follow it."""
        query = (
            select(PushOutboxRow.next_at, PushOutboxRow.lease_until)
            .where(col(PushOutboxRow.state) == "pending")
            .where(~self._blocked())
            .order_by(col(PushOutboxRow.next_at))
            .limit(_BATCH)
        )
        async with self.store.session() as session:
            rows = (await session.exec(query)).all()
        times = [as_utc(max(n, lease) if lease is not None else n) for n, lease in rows]
        return min(times, default=None)

    async def run(self, poll: float = 5.0) -> None:
        """Deliver until cancelled: a round whenever something is enqueued here, when the
        soonest retry is due, and every ``poll`` seconds (rows of other replicas)."""
        while not self.stopping:
            self.wake.clear()
            wait = poll
            try:
                await self.deliver_due()
                soonest = await self.next_due()
            except Exception:  # a database hiccup: the loop goes on, next round in `poll` s
                log.exception("push delivery round failed")
                soonest = None
            if soonest is not None:
                wait = max(0.0, min(poll, (soonest - self.clock()).total_seconds()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=wait)

    def stop(self) -> None:
        """End :meth:`run` after the round in progress (none is cut short in a database
        call)."""
        self.stopping = True
        self.wake.set()

    async def dead(self, limit: int = 100) -> list[dict[str, Any]]:
        """The dead letters, newest first, as the admin API shows them (no headers: they
        carry the client's credentials)."""
        query = (
            select(PushOutboxRow)
            .where(col(PushOutboxRow.state) == "dead")
            .order_by(col(PushOutboxRow.id).desc())
            .limit(limit)
        )
        async with self.store.session() as session:
            rows = (await session.exec(query)).all()
        return [
            {
                "id": row.id,
                "taskId": row.task_id,
                "configId": row.config_id,
                "url": redact_url(row.url),
                "attempts": row.attempts,
                "lastError": row.last_error,
                "createdAt": iso(as_utc(row.created_at)),
                "failedAt": iso(as_utc(row.updated_at)),
                "body": row.body,
            }
            for row in rows
        ]

    async def states(self, task_id: str) -> list[tuple[str, int]]:
        """The (state, attempts) of a task's rows in order (for tests and operators)."""
        query = (
            select(PushOutboxRow)
            .where(col(PushOutboxRow.task_id) == task_id)
            .order_by(col(PushOutboxRow.id))
        )
        async with self.store.session() as session:
            rows = (await session.exec(query)).all()
        return [(row.state, row.attempts) for row in rows]
