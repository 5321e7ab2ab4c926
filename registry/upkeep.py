"""Upkeep of registered agents: one health check (and card refresh) of an agent, and the
health of every agent as the database records it.

:class:`Upkeep` runs one check of one agent: probe its endpoint and, for a crawled agent
whose card is due, fetch the card again conditionally and apply a change. It records each
check and each passive report (the router's calls) in the agent's refresh row, and keeps
every agent's :class:`~registry.health.Health` in memory, reloaded when another process
wrote some. *When* checks run, and which replica runs them, is :mod:`registry.refresh`'s
business; the rules for the next check and the status are :mod:`registry.health`'s.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from registry.cards import AgentCard, Interface
from registry.crawler import Crawler, Fetched
from registry.diff import agent_diff
from registry.errors import Conflict, NotFound, RegistryError, agent_not_found
from registry.health import MAX_ERROR_CHARS, Health, RefreshPolicy
from registry.jsonsafe import loads_limited
from registry.records import AgentRecord, Source, as_utc
from registry.tables import RefreshRow
from registry.verification import AgentIndex, Verifier

log = logging.getLogger(__name__)


class CrawledIndex(AgentIndex, Protocol):
    """What a check needs of the registry (:class:`registry.service.Registry`) besides what
    re-verification needs: the crawler, an agent and its card bytes, a full reload and the
    check that no other agent has a card's endpoint."""

    crawler: Crawler

    def get(self, agent_id: str) -> AgentRecord:
        """An agent from the catalog, or :class:`NotFound`."""
        ...

    async def raw_card(self, agent_id: str) -> bytes:
        """The agent's card bytes as fetched or pushed."""
        ...

    async def reload(self) -> None:
        """Rebuild the in-memory catalog and health from the database."""
        ...

    def check_interfaces(self, card: AgentCard, exclude: str | None = None) -> None:
        """Refuse a card whose endpoint another agent already has."""
        ...


class Upkeep:
    """Health checks, card refreshes and the health of every agent; one per registry."""

    def __init__(self, agents: CrawledIndex, verifier: Verifier, policy: RefreshPolicy) -> None:
        self.agents = agents
        self.verifier = verifier
        self.policy = policy
        self.health: dict[str, Health] = {}  # by agent id; see registry.health
        self.version = -1
        """The database's health version this process has read or written up to."""
        self._locks: dict[str, asyncio.Lock] = {}

    # --- the health of every agent -----------------------------------------------------------

    async def reload_health(self, *, full: bool) -> None:
        """Read the health of every agent (``full``) or of those written since
        :attr:`version`; a newer state installed here meanwhile is kept."""
        store = self.agents.store
        version = await store.health_version()  # read first, as for the catalog
        rows = await store.refresh_rows(-1 if full else self.version)
        health = {} if full else dict(self.health)
        for row in rows:
            known = self.health.get(row.agent_id)
            if known is not None and known.revision > row.revision:
                health[row.agent_id] = known  # installed here while we were reading
            else:
                health[row.agent_id] = _health(row)
        self.health = health
        self.version = max(self.version, version)

    def health_of(self, agent_id: str) -> Health:
        """The agent's current health (``unknown`` if nothing was recorded yet)."""
        return self.health.get(agent_id) or _UNKNOWN

    def forget(self, agent_id: str) -> None:
        """Drop the health of a removed agent."""
        self.health = {k: v for k, v in self.health.items() if k != agent_id}

    def new_refresh_row(
        self, agent_id: str, source: Source, interval: float | None, max_age: int | None
    ) -> RefreshRow:
        """The refresh state of an agent registered now: a crawled agent was just fetched
        (healthy); a pushed one is ``unknown`` until its endpoint is probed or called."""
        now = self.policy.now()
        crawled = source != "push"
        next_card = self.policy.after_success(now, interval, max_age) if crawled else None
        return RefreshRow(
            agent_id=agent_id,
            status="healthy" if crawled else "unknown",
            last_success=now if crawled else None,
            last_checked=now if crawled else None,
            next_check_at=self.policy.next_probe(now, next_card),
            next_card_at=next_card,
            interval=interval,
            max_age=max_age,
        )

    def install_health(self, row: RefreshRow | None, agent_id: str) -> Health:
        """Hold ``row`` (as just written) as the agent's health; None: the agent was removed."""
        if row is None:  # removed meanwhile
            return self.health_of(agent_id)
        health = _health(row)
        self.health = {**self.health, agent_id: health}
        if row.revision == self.version + 1:  # our own write, nobody else's between
            self.version = row.revision
        return health

    # --- checks ------------------------------------------------------------------------------

    async def refresh(self, agent_id: str) -> tuple[AgentRecord, bool]:
        """Fetch an agent's card again now (conditionally) and record the check in its health;
        return the record and whether the card changed. Pushed agents: ``409 not_crawled``;
        a check of the agent already in flight (here or on another replica):
        ``409 refresh_in_progress``."""
        await self.agents.sync()
        current = self.agents.get(agent_id)
        if current.source == "push" or not current.source_url:
            raise RegistryError(
                f"agent {agent_id!r} was pushed, not crawled; PUT a new card instead",
                code="not_crawled",
                status=409,
            )
        result = await self.check_claimed(agent_id, f"api:{uuid.uuid4().hex[:8]}", card=True)
        if result is None:
            raise Conflict(
                f"agent {agent_id!r} is being checked right now; try again in a moment",
                code="refresh_in_progress",
                details={"id": agent_id},
            )
        return result

    async def check_claimed(
        self,
        agent_id: str,
        holder: str,
        *,
        due_only: bool = False,
        card: bool | None = None,
        claim_for: float = 120.0,
    ) -> tuple[AgentRecord, bool] | None:
        """Claim the agent's check in the database, then run it (:meth:`check_agent`);
        None if another check of it is in flight (or, ``due_only``, it is not due)."""
        now = self.policy.now()
        until = now + timedelta(seconds=claim_for)
        if await self.agents.store.claim(agent_id, holder, now, until, due_only=due_only) is None:
            return None
        return await self.check_agent(agent_id, card=card)

    async def check_agent(
        self, agent_id: str, *, card: bool | None = None
    ) -> tuple[AgentRecord, bool]:
        """One health check: probe the agent's JSON-RPC endpoint (any HTTP answer below 500
        means it is up) and, for a crawled agent whose card is due (or ``card=True``), fetch
        the card again conditionally and apply a change. Health follows the endpoint; a card
        that cannot be fetched while the endpoint answers is recorded as ``card_error``.
        The first failure is raised after the result is recorded."""
        current = self.agents.get(agent_id)
        state = await self.agents.store.refresh_row(agent_id) or RefreshRow(agent_id=agent_id)
        crawled = current.source != "push" and bool(current.source_url)
        now = self.policy.now()
        due = state.next_card_at is None or _aware(state.next_card_at) <= now  # type: ignore[operator]
        fetch_card = crawled and (card if card is not None else due)
        record, changed, fetched = current, False, None
        card_failure: RegistryError | None = None
        if fetch_card:
            try:
                # an operator's refresh (card=True) checks a signed card's signature again
                # even when it is unchanged; a scheduled 304 costs no parse
                record, changed, fetched = await self._refetch(current, state, card is True)
            except NotFound:
                raise
            except RegistryError as exc:
                card_failure = exc
        try:
            interface = _endpoint(record)
            if interface.binding == "GRPC":  # no HTTP/1.1 there: a connection is the answer
                await self.agents.crawler.probe_connect(interface.url)
            else:
                await self.agents.crawler.probe(interface.url)
        except RegistryError as exc:
            detail = exc.message
            if card_failure is not None and card_failure.message != exc.message:
                detail = f"{exc.message} (and the card: {card_failure.message})"
            await self.record_failure(agent_id, detail, schedule=True)
            raise
        outcome = await self._record_success(
            agent_id,
            fetched,
            card_checked=fetch_card,
            card_error=card_failure.message if card_failure else None,
        )
        if outcome is None:
            raise agent_not_found(agent_id)  # removed while we were checking
        if card_failure is not None:
            raise card_failure
        return record, changed

    async def _refetch(
        self, current: AgentRecord, state: RefreshRow, reverify: bool = False
    ) -> tuple[AgentRecord, bool, Fetched]:
        """Fetch the card again; write the agent only when what is indexed changes. An
        unchanged signed card is verified again when ``reverify`` or when its keys come from
        a URL (they expire and rotate without the trust store changing)."""
        assert current.source_url is not None
        agents = self.agents
        conditional = {
            "etag": state.etag or current.etag,
            "last_modified": state.last_modified or current.last_modified,
        }
        if current.source == "card_url":
            fetched = await agents.crawler.fetch_card(current.source_url, **conditional)
        else:
            fetched = await agents.crawler.discover(current.source_url, **conditional)
        generation = self.verifier.generation
        now = self.policy.now()
        sha = None if fetched.not_modified else hashlib.sha256(fetched.raw).hexdigest()
        if sha is None or sha == current.card_sha256:
            if not (current.card.signatures and (reverify or _remote_keys(current))):
                # the same card, verified by keys whose changes re-verify every agent anyway:
                # nothing to parse (a 304 costs nothing more)
                return current, False, fetched
            # verified by keys fetched from a JWKS URL, which expire and rotate: check again
            raw = await agents.raw_card(current.id)
            card, verification = await self.verifier.check(loads_limited(raw, max_depth=256))
            if card == current.card and verification == current.verification:
                return current, False, fetched
            record = current.model_copy(update={"card": card, "verification": verification})
            return await self._apply(current, record, raw, generation), False, fetched
        raw = fetched.raw
        card, verification = await self.verifier.check(fetched.data)
        agents.check_interfaces(card, exclude=current.id)
        record = current.model_copy(
            update={
                "card": card,
                "verification": verification,
                "card_sha256": sha,
                "card_url": fetched.url,
                "etag": fetched.etag,
                "last_modified": fetched.last_modified,
                "fetched_at": now,
                "updated_at": now,
            }
        )
        if card == current.card and verification == current.verification:
            # new bytes, same meaning (a timestamp, a re-ordering): a revision, no re-index
            written = await agents.store.replace_raw(
                record, raw, expected_sha256=current.card_sha256
            )
            if written is None:
                return await self._current_after_race(current.id), False, fetched
            agents.catalog.patch(record)
            return record, bool(written), fetched
        return await self._apply(current, record, raw, generation), True, fetched

    async def _apply(
        self, current: AgentRecord, record: AgentRecord, raw: bytes, generation: int
    ) -> AgentRecord:
        """Write a changed agent if its stored card is still the one it was read from."""
        result = await self.agents.store.update(
            record, raw, expected_sha256=current.card_sha256, diff=agent_diff(current, record)
        )
        if result is None:
            return await self._current_after_race(current.id)
        await self.agents.install(record, result[1])
        return await self.verifier.recheck_if_keys_changed(record, generation)

    async def _current_after_race(self, agent_id: str) -> AgentRecord:
        """The agent as another writer left it (removed: NotFound)."""
        await self.agents.reload()
        return self.agents.get(agent_id)

    # --- recording checks and reports --------------------------------------------------------

    async def report_failure(self, agent_id: str, error: str) -> Health | None:
        """Passive health: the router could not reach the agent or got a 5xx. Counts as a
        failed check at most once per ``retry_base`` seconds (a burst of failed calls is one
        failure), not at all while the agent is already unreachable, and brings the next check
        forward (never later than scheduled)."""
        if agent_id not in self.agents.catalog.snapshot.agents:
            return None
        if self.health_of(agent_id).status == "unreachable":
            return None
        return await self.record_failure(agent_id, error, schedule=False)

    async def report_success(self, agent_id: str) -> Health | None:
        """Passive health: the agent answered the router. Written only when that changes the
        agent's status (so a healthy agent's calls cost no database write)."""
        if agent_id not in self.agents.catalog.snapshot.agents:
            return None
        if self.health_of(agent_id).status == "healthy":
            return None
        return await self._record_success(agent_id, None, passive=True)

    async def set_refresh_interval(self, agent_id: str, interval: float | None) -> Health:
        """Set (or with None, clear) the agent's own refresh interval; reschedules its card."""
        await self.agents.sync()
        self.agents.get(agent_id)
        now = self.policy.now()

        def change(row: RefreshRow) -> RefreshRow:
            row.interval = interval
            row.next_card_at = self.policy.after_success(now, interval, row.max_age)
            if row.consecutive_failures == 0:
                row.next_check_at = self.policy.next_probe(now, row.next_card_at)
            return row

        return self.install_health(await self._modify(agent_id, change), agent_id)

    async def _record_success(
        self,
        agent_id: str,
        fetched: Fetched | None,
        *,
        passive: bool = False,
        card_checked: bool = False,
        card_error: str | None = None,
    ) -> Health | None:
        """Record a success (and release the check's claim); None if the agent is gone."""
        now = self.policy.now()

        def change(row: RefreshRow) -> RefreshRow:
            if fetched is not None:
                row.etag, row.last_modified = fetched.etag, fetched.last_modified
                if fetched.max_age is not None or not fetched.not_modified:
                    row.max_age = fetched.max_age  # a 304 without Cache-Control keeps it
            if card_checked:
                row.card_error = card_error
                row.next_card_at = self.policy.after_success(now, row.interval, row.max_age)
            if not passive or row.next_check_at is None or row.consecutive_failures:
                row.next_check_at = self.policy.next_probe(now, row.next_card_at)
            row.status, row.consecutive_failures = "healthy", 0
            row.last_success = now
            if not passive:
                row.last_checked = now
                row.claimed_until = row.claimed_by = None
            return row

        row = await self._modify(agent_id, change)
        return None if row is None else self.install_health(row, agent_id)

    async def record_failure(self, agent_id: str, error: str, *, schedule: bool) -> Health:
        """Record a failed check (``schedule``: it releases its claim and backs off) or call
        (a call's failure within ``retry_base`` of the last failure, or of an agent already
        unreachable, is the same failure: not counted again)."""
        now = self.policy.now()
        window = timedelta(seconds=self.policy.retry_base)

        def change(row: RefreshRow) -> RefreshRow | None:
            if not schedule and (
                row.status == "unreachable"
                or (row.last_failure is not None and now - as_utc(row.last_failure) < window)
            ):
                return None
            row.consecutive_failures += 1
            row.status = self.policy.status_after(row.consecutive_failures)
            row.last_error = error[:MAX_ERROR_CHARS]
            row.last_failure = now
            retry = self.policy.after_failure(now, row.consecutive_failures)
            if schedule:
                row.last_checked = now
                row.next_check_at = retry
                row.claimed_until = row.claimed_by = None
            elif row.next_check_at is None or _aware(row.next_check_at) > retry:  # type: ignore[operator]
                row.next_check_at = retry  # passive: check soon to confirm, never later
            return row

        health = self.install_health(await self._modify(agent_id, change), agent_id)
        log.info(
            "agent %s is %s after %d consecutive failure(s): %s",
            agent_id,
            health.status,
            health.consecutive_failures,
            error,
        )
        return health

    async def _modify(
        self, agent_id: str, change: Callable[[RefreshRow], RefreshRow | None]
    ) -> RefreshRow | None:
        # one write at a time per agent in this process; the row lock covers other processes
        lock = self._locks.setdefault(agent_id, asyncio.Lock())
        try:
            async with lock:
                return await self.agents.store.modify_refresh(agent_id, change)
        finally:
            if not lock.locked():
                self._locks.pop(agent_id, None)


_UNKNOWN = Health()  # shared: health_of runs on every answer the router relays


def _health(row: RefreshRow) -> Health:
    return Health(
        status=row.status,  # type: ignore[arg-type]
        consecutive_failures=row.consecutive_failures,
        last_error=row.last_error,
        last_success=_aware(row.last_success),
        last_failure=_aware(row.last_failure),
        last_checked=_aware(row.last_checked),
        next_check_at=_aware(row.next_check_at),
        next_card_at=_aware(row.next_card_at),
        interval=row.interval,
        card_error=row.card_error,
        revision=row.revision,
    )


def _endpoint(record: AgentRecord) -> Interface:
    """The interface a health probe asks: the agent's first JSON-RPC interface (what the
    router calls first), else its first HTTP+JSON one, else its first interface."""
    for binding in ("JSONRPC", "HTTP+JSON"):
        for interface in record.card.interfaces:
            if interface.binding == binding:
                return interface
    return record.card.interfaces[0]


def _remote_keys(record: AgentRecord) -> bool:
    """Whether the card's verification rests on keys fetched from a URL (they expire and
    rotate without the trust store changing)."""
    source = record.verification.key_source or ""
    return bool(record.card.signatures) and source.startswith(("jwks:", "jku:"))


def _aware(value: datetime | None) -> datetime | None:
    return as_utc(value) if value is not None else None
