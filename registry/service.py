"""The registry service: register, refresh and remove agents; keep the catalog in step.

It composes the crawler (fetch), the card readers (normalize), the store (persist) and the
catalog (serve reads). The admin API, the CLI's ``serve`` and the seeds loader all go
through it.

Consistency: the database is the truth. Each write returns the catalog version it produced;
the in-memory snapshot takes the written record directly when it was one version behind,
and reloads from the database when another process wrote in between (:meth:`sync`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import unicodedata
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError

from registry.cards import AgentCard, parse_card
from registry.catalog import Catalog, Snapshot
from registry.crawler import Crawler, Fetched, is_card_url
from registry.diff import agent_diff
from registry.errors import CardError, Conflict, NotFound, RegistryError
from registry.health import MAX_ERROR_CHARS, Health, RefreshPolicy
from registry.jsonsafe import JsonLimitError, loads_limited
from registry.records import AgentRecord, Source, VerificationRecord, as_utc, utcnow
from registry.signatures import KeyResolver, StaticKeys, verify_card
from registry.store import Store
from registry.tables import RefreshRow

log = logging.getLogger(__name__)

_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_ID_ATTEMPTS = 5


class Registry:
    """Agent registration and the catalog view; one per process."""

    def __init__(
        self,
        store: Store,
        crawler: Crawler,
        catalog: Catalog | None = None,
        *,
        max_card_bytes: int = 1024 * 1024,
        keys: KeyResolver | None = None,
        require_signed: bool = False,
        policy: RefreshPolicy | None = None,
    ) -> None:
        self.store = store
        self.crawler = crawler
        self.catalog = catalog or Catalog()
        self.max_card_bytes = max_card_bytes
        self.keys: KeyResolver = keys or StaticKeys([])
        self.require_signed = require_signed
        self.policy = policy or RefreshPolicy()
        self.health: dict[str, Health] = {}  # by agent id; see registry.health
        self._health_version = -1
        self._key_generation = 0
        self._reverify_lock = asyncio.Lock()
        self._health_locks: dict[str, asyncio.Lock] = {}
        self.on_index: Callable[[Snapshot], Awaitable[Any]] | None = None
        """Called with the new snapshot after every catalog change made or read by this
        process (the router embeds new skill texts there: :mod:`registry.vectors`)."""

    async def load(self) -> None:
        """Create the schema if needed and load the catalog from the database; agents
        registered by a version without scheduled refresh get a schedule."""
        await self.store.create_schema()
        await self.store.adopt_missing(
            lambda agent_id, source: self.new_refresh_row(agent_id, source, None, None)  # type: ignore[arg-type]
        )
        await self.reload()

    async def reload(self) -> None:
        """Rebuild the in-memory catalog (and the health of every agent) from the database."""
        version = await self.store.catalog_version()  # read first: records are at least as new
        self.catalog.replace(await self.store.all(), version)
        await self._reload_health(full=True)
        await self._indexed()

    async def sync(self) -> bool:
        """Reload what another process changed (catalog, health); True if the catalog
        changed."""
        catalog_version, health_version = await self.store.versions()
        if catalog_version != self.catalog.snapshot.version:
            await self.reload()
            return True
        if health_version != self._health_version:
            await self._reload_health(full=False)
        return False

    async def _reload_health(self, *, full: bool) -> None:
        version = await self.store.health_version()  # read first, as for the catalog
        rows = await self.store.refresh_rows(-1 if full else self._health_version)
        health = {} if full else dict(self.health)
        for row in rows:
            known = self.health.get(row.agent_id)
            if known is not None and known.revision > row.revision:
                health[row.agent_id] = known  # installed here while we were reading
            else:
                health[row.agent_id] = _health(row)
        self.health = health
        self._health_version = max(self._health_version, version)

    def health_of(self, agent_id: str) -> Health:
        """The agent's current health (``unknown`` if nothing was recorded yet)."""
        return self.health.get(agent_id) or _UNKNOWN

    def routable(self, record: AgentRecord, *, health: bool = True) -> bool:
        """Whether routing may choose this agent: the ``SWITCHBOARD_REQUIRE_SIGNED_CARDS``
        policy and (with ``health``) not ``unreachable``.

        Unverified and unreachable agents stay in the catalog either way.
        """
        if self.require_signed and record.verification.status != "verified":
            return False
        return not health or self.health_of(record.id).routable

    def unroutable_reason(self, record: AgentRecord) -> str:
        """Why :meth:`routable` is False for ``record`` (one sentence)."""
        if self.require_signed and record.verification.status != "verified":
            return (
                f"its card signature is {record.verification.status!r} and "
                "SWITCHBOARD_REQUIRE_SIGNED_CARDS only routes to verified cards"
            )
        health = self.health_of(record.id)
        return (
            f"it is unreachable ({health.consecutive_failures} consecutive failed checks or "
            f"calls; last error: {health.last_error or 'none recorded'})"
        )

    def routable_agents(self) -> list[AgentRecord]:
        """The agents routing may choose, from the current snapshot."""
        return [r for r in self.catalog.snapshot.agents.values() if self.routable(r)]

    async def check(self, data: Any) -> tuple[AgentCard, VerificationRecord]:
        """Validate a card and check its signatures against the trusted keys.

        A verified card is read from what its signature covers only: fields outside the
        verified payload form can never change the indexed agent.
        """
        card = parse_card(data)  # errors name the fields of the card as sent
        try:
            verification = await verify_card(data, self.keys)
        except Exception as exc:  # a verifier bug must not become a 500 or block others
            log.exception("verifying a card failed")
            return card, VerificationRecord(status="invalid", reason=f"verification failed: {exc}")
        record = VerificationRecord(**verification.to_api())
        signed = verification.signed_content
        if record.status != "verified" or signed is None:
            return card, record
        try:
            signed_card = parse_card(signed).model_copy(update={"signatures": card.signatures})
            return signed_card, record
        except CardError as exc:
            reason = f"the signed content alone is not a valid card: {exc.message}"
            return card, VerificationRecord(status="invalid", kid=record.kid, reason=reason)

    async def reverify_all(self) -> int:
        """Check every agent's card again (after the trusted keys changed); return how many
        verification results changed.

        Runs one at a time; a change of keys during a run makes the run start over, so the
        last keys always win.
        """
        self._key_generation += 1
        async with self._reverify_lock:
            changed = 0
            while True:
                generation = self._key_generation
                await self.sync()
                for record in list(self.catalog.snapshot.agents.values()):
                    changed += await self._reverify(record.id)
                if generation == self._key_generation:
                    return changed

    async def _reverify(self, agent_id: str) -> int:
        """Re-check one agent's stored card; 1 if its verification changed, else 0."""
        record = self.catalog.snapshot.agents.get(agent_id)
        raw = await self.store.raw_card(agent_id)
        if record is None or raw is None:
            return 0
        try:
            card, verification = await self.check(loads_limited(raw, max_depth=256))
        except (JsonLimitError, CardError) as exc:
            card = record.card
            verification = VerificationRecord(
                status="invalid", reason=f"the stored card cannot be read: {exc}"
            )
        if verification == record.verification and card == record.card:
            return 0
        updated = record.model_copy(update={"card": card, "verification": verification})
        # only if the card is still the one just checked: never undo a concurrent write
        result = await self.store.update(
            updated, raw, expected_sha256=record.card_sha256, diff=agent_diff(record, updated)
        )
        if result is None:
            return 0
        await self._install(updated, result[1])
        return 1

    def get(self, agent_id: str) -> AgentRecord:
        """An agent from the catalog, or :class:`NotFound`."""
        record = self.catalog.snapshot.agents.get(agent_id)
        if record is None:
            raise _not_found(agent_id)
        return record

    async def raw_card(self, agent_id: str) -> bytes:
        """The agent's card bytes as fetched or pushed."""
        raw = await self.store.raw_card(agent_id)
        if raw is None:
            raise _not_found(agent_id)
        return raw

    # --- writes --------------------------------------------------------------------------

    async def register_url(
        self, url: str, agent_id: str | None = None, *, refresh_interval: float | None = None
    ) -> AgentRecord:
        """Register the agent at a base URL (well-known discovery) or an exact card URL;
        ``refresh_interval`` (seconds) overrides the default schedule for this agent."""
        await self.sync()
        self._check_new_id(agent_id)
        # the catalog was just synced; the database's unique constraint covers a race
        existing = next(
            (r.id for r in self.catalog.snapshot.agents.values() if r.source_url == url), None
        )
        if existing:
            raise _duplicate(existing, f"{url} is already registered as agent {existing!r}")
        source: Source = "card_url" if is_card_url(url) else "url"
        if source == "card_url":
            fetched = await self.crawler.fetch_card(url)
        else:
            fetched = await self.crawler.discover(url)
        generation = self._key_generation
        card, verification = await self.check(fetched.data)
        record = await self._create(
            card, fetched.raw, source, url, fetched, agent_id, verification, refresh_interval
        )
        return await self._recheck_if_keys_changed(record, generation)

    async def register_card(
        self, data: Any, agent_id: str | None = None, *, refresh_interval: float | None = None
    ) -> AgentRecord:
        """Register a card pushed as JSON (it cannot be refreshed by fetching; its health is
        checked by probing its endpoint)."""
        await self.sync()
        self._check_new_id(agent_id)
        raw = self._raw(data)
        generation = self._key_generation
        card, verification = await self.check(data)
        record = await self._create(
            card, raw, "push", None, None, agent_id, verification, refresh_interval
        )
        return await self._recheck_if_keys_changed(record, generation)

    async def replace_card(self, agent_id: str, data: Any) -> AgentRecord:
        """Replace the card of a pushed agent with a new one."""
        await self.sync()
        current = self.get(agent_id)
        if current.source != "push":
            raise RegistryError(
                f"agent {agent_id!r} is crawled from {current.source_url}; refresh it instead",
                code="not_pushed",
                status=409,
            )
        raw = self._raw(data)
        generation = self._key_generation
        card, verification = await self.check(data)
        self._check_interfaces(card, exclude=agent_id)
        now = utcnow()
        record = current.model_copy(
            update={
                "card": card,
                "card_sha256": _sha(raw),
                "updated_at": now,
                "fetched_at": now,
                "verification": verification,
            }
        )
        record = (await self._update(record, raw, agent_diff(current, record)))[0]
        return await self._recheck_if_keys_changed(record, generation)

    async def refresh(self, agent_id: str) -> tuple[AgentRecord, bool]:
        """Fetch an agent's card again now (conditionally) and record the check in its health;
        return the record and whether the card changed. Pushed agents: ``409 not_crawled``;
        a check of the agent already in flight (here or on another replica):
        ``409 refresh_in_progress``."""
        await self.sync()
        current = self.get(agent_id)
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
        if await self.store.claim(agent_id, holder, now, until, due_only=due_only) is None:
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
        current = self.get(agent_id)
        state = await self.store.refresh_row(agent_id) or RefreshRow(agent_id=agent_id)
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
            await self.crawler.probe(_endpoint(record))
        except RegistryError as exc:
            detail = exc.message
            if card_failure is not None and card_failure.message != exc.message:
                detail = f"{exc.message} (and the card: {card_failure.message})"
            await self._record_failure(agent_id, detail, schedule=True)
            raise
        outcome = await self._record_success(
            agent_id,
            fetched,
            card_checked=fetch_card,
            card_error=card_failure.message if card_failure else None,
        )
        if outcome is None:
            raise _not_found(agent_id)  # removed while we were checking
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
        conditional = {
            "etag": state.etag or current.etag,
            "last_modified": state.last_modified or current.last_modified,
        }
        if current.source == "card_url":
            fetched = await self.crawler.fetch_card(current.source_url, **conditional)
        else:
            fetched = await self.crawler.discover(current.source_url, **conditional)
        generation = self._key_generation
        now = self.policy.now()
        sha = None if fetched.not_modified else _sha(fetched.raw)
        if sha is None or sha == current.card_sha256:
            if not (current.card.signatures and (reverify or _remote_keys(current))):
                # the same card, verified by keys whose changes re-verify every agent anyway:
                # nothing to parse (a 304 costs nothing more)
                return current, False, fetched
            # verified by keys fetched from a JWKS URL, which expire and rotate: check again
            raw = await self.raw_card(current.id)
            card, verification = await self.check(loads_limited(raw, max_depth=256))
            if card == current.card and verification == current.verification:
                return current, False, fetched
            record = current.model_copy(update={"card": card, "verification": verification})
            return await self._apply(current, record, raw, generation), False, fetched
        raw = fetched.raw
        card, verification = await self.check(fetched.data)
        self._check_interfaces(card, exclude=current.id)
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
            written = await self.store.replace_raw(record, raw, expected_sha256=current.card_sha256)
            if written is None:
                return await self._current_after_race(current.id), False, fetched
            self.catalog.patch(record)
            return record, bool(written), fetched
        return await self._apply(current, record, raw, generation), True, fetched

    async def _apply(
        self, current: AgentRecord, record: AgentRecord, raw: bytes, generation: int
    ) -> AgentRecord:
        """Write a changed agent if its stored card is still the one it was read from."""
        result = await self.store.update(
            record, raw, expected_sha256=current.card_sha256, diff=agent_diff(current, record)
        )
        if result is None:
            return await self._current_after_race(current.id)
        await self._install(record, result[1])
        return await self._recheck_if_keys_changed(record, generation)

    async def _current_after_race(self, agent_id: str) -> AgentRecord:
        """The agent as another writer left it (removed: NotFound)."""
        await self.reload()
        return self.get(agent_id)

    # --- health ------------------------------------------------------------------------------

    async def report_failure(self, agent_id: str, error: str) -> Health | None:
        """Passive health: the router could not reach the agent or got a 5xx. Counts as a
        failed check at most once per ``retry_base`` seconds (a burst of failed calls is one
        failure), not at all while the agent is already unreachable, and brings the next check
        forward (never later than scheduled)."""
        if agent_id not in self.catalog.snapshot.agents:
            return None
        if self.health_of(agent_id).status == "unreachable":
            return None
        return await self._record_failure(agent_id, error, schedule=False)

    async def report_success(self, agent_id: str) -> Health | None:
        """Passive health: the agent answered the router. Written only when that changes the
        agent's status (so a healthy agent's calls cost no database write)."""
        if agent_id not in self.catalog.snapshot.agents:
            return None
        if self.health_of(agent_id).status == "healthy":
            return None
        return await self._record_success(agent_id, None, passive=True)

    async def set_refresh_interval(self, agent_id: str, interval: float | None) -> Health:
        """Set (or with None, clear) the agent's own refresh interval; reschedules its card."""
        await self.sync()
        self.get(agent_id)
        now = self.policy.now()

        def change(row: RefreshRow) -> RefreshRow:
            row.interval = interval
            row.next_card_at = self.policy.after_success(now, interval, row.max_age)
            if row.consecutive_failures == 0:
                row.next_check_at = self.policy.next_probe(now, row.next_card_at)
            return row

        return self._install_health(await self._modify_health(agent_id, change), agent_id)

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

        row = await self._modify_health(agent_id, change)
        return None if row is None else self._install_health(row, agent_id)

    async def _record_failure(self, agent_id: str, error: str, *, schedule: bool) -> Health:
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

        health = self._install_health(await self._modify_health(agent_id, change), agent_id)
        log.info(
            "agent %s is %s after %d consecutive failure(s): %s",
            agent_id,
            health.status,
            health.consecutive_failures,
            error,
        )
        return health

    async def _modify_health(
        self, agent_id: str, change: Callable[[RefreshRow], RefreshRow | None]
    ) -> RefreshRow | None:
        # one write at a time per agent in this process; the row lock covers other processes
        lock = self._health_locks.setdefault(agent_id, asyncio.Lock())
        try:
            async with lock:
                return await self.store.modify_refresh(agent_id, change)
        finally:
            if not lock.locked():
                self._health_locks.pop(agent_id, None)

    def _install_health(self, row: RefreshRow | None, agent_id: str) -> Health:
        if row is None:  # removed meanwhile
            return self.health_of(agent_id)
        health = _health(row)
        self.health = {**self.health, agent_id: health}
        if row.revision == self._health_version + 1:  # our own write, nobody else's between
            self._health_version = row.revision
        return health

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

    async def remove(self, agent_id: str) -> None:
        """Delete an agent from the index."""
        version = await self.store.delete(agent_id)
        if version is None:
            raise _not_found(agent_id)
        self.health = {k: v for k, v in self.health.items() if k != agent_id}
        if not self.catalog.remove(agent_id, version):
            await self.reload()

    # --- internals ---------------------------------------------------------------------------

    def _raw(self, data: Any) -> bytes:
        """The stored bytes of a pushed card, within the card size limit."""
        raw = json.dumps(data, ensure_ascii=False, allow_nan=False).encode()
        if len(raw) > self.max_card_bytes:
            raise RegistryError(
                f"the card is {len(raw)} bytes; the limit is {self.max_card_bytes} "
                "(SWITCHBOARD_MAX_CARD_BYTES)",
                code="too_large",
                status=413,
                details={"size": len(raw), "limit": self.max_card_bytes},
            )
        return raw

    def _check_new_id(self, agent_id: str | None) -> None:
        if agent_id is None:
            return
        if not _ID.match(agent_id):
            raise RegistryError(
                "an agent id is 1 to 64 characters of a-z, 0-9, '.', '_' and '-', "
                "starting with a letter or digit",
                code="invalid_id",
                details={"id": agent_id},
            )
        if agent_id in self.catalog.snapshot.agents:
            raise _duplicate(agent_id, f"an agent with id {agent_id!r} already exists")

    async def _create(
        self,
        card: AgentCard,
        raw: bytes,
        source: Source,
        source_url: str | None,
        fetched: Fetched | None,
        agent_id: str | None,
        verification: VerificationRecord,
        refresh_interval: float | None = None,
    ) -> AgentRecord:
        self._check_interfaces(card)
        now = utcnow()
        for _attempt in range(_ID_ATTEMPTS):
            chosen = agent_id or _new_id(
                card.name, source_url or card.interfaces[0].url, set(self.catalog.snapshot.agents)
            )
            record = AgentRecord(
                id=chosen,
                card=card,
                source=source,
                source_url=source_url,
                card_url=fetched.url if fetched else None,
                card_sha256=_sha(raw),
                etag=fetched.etag if fetched else None,
                last_modified=fetched.last_modified if fetched else None,
                created_at=now,
                updated_at=now,
                fetched_at=now,
                verification=verification,
            )
            max_age = fetched.max_age if fetched else None
            refresh = self.new_refresh_row(chosen, source, refresh_interval, max_age)
            try:
                version = await self.store.insert(record, raw, refresh)
            except IntegrityError:
                # another request (or replica) took the id or the source meanwhile
                await self.reload()
                if source_url and (owner := await self.store.id_for_source(source_url)):
                    message = f"{source_url} is already registered as {owner!r}"
                    raise _duplicate(owner, message) from None
                self._check_new_id(agent_id)
                self._check_interfaces(card)
                continue
            await self._install(record, version)
            self._install_health(refresh, chosen)
            return record
        raise Conflict(
            "could not choose a free agent id; try again",
            code="duplicate_agent",
            details={"id": agent_id},
        )

    async def _update(
        self, record: AgentRecord, raw: bytes, diff: dict[str, Any] | None = None
    ) -> tuple[AgentRecord, bool]:
        result = await self.store.update(record, raw, diff=diff)
        if result is None:  # removed while we were fetching: do not bring it back
            await self.reload()
            raise _not_found(record.id)
        changed, version = result
        await self._install(record, version)
        return record, changed

    async def _recheck_if_keys_changed(self, record: AgentRecord, generation: int) -> AgentRecord:
        """If the trusted keys changed while ``record`` was being checked, check it again
        (a re-verification that ran meanwhile could not see it yet)."""
        if generation != self._key_generation:
            async with self._reverify_lock:
                await self._reverify(record.id)
        return self.catalog.snapshot.agents.get(record.id, record)

    async def _install(self, record: AgentRecord, version: int) -> None:
        if not self.catalog.upsert(record, version):
            await self.reload()  # another process wrote in between: rebuild from the database
        else:
            await self._indexed()

    async def _indexed(self) -> None:
        if self.on_index is not None:
            await self.on_index(self.catalog.snapshot)

    def _check_interfaces(self, card: AgentCard, exclude: str | None = None) -> None:
        """Refuse a card whose endpoint (URL and tenant) another agent already has."""
        keys = {(i.url, i.tenant) for i in card.interfaces}
        for other in self.catalog.snapshot.agents.values():
            if other.id == exclude:
                continue
            shared = keys & {(i.url, i.tenant) for i in other.card.interfaces}
            if shared:
                url, tenant = sorted(shared, key=str)[0]
                where = f"{url} (tenant {tenant})" if tenant else url
                raise _duplicate(
                    other.id, f"interface {where} is already registered as agent {other.id!r}"
                )


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


def _endpoint(record: AgentRecord) -> str:
    """The URL a health probe asks: the agent's first JSON-RPC interface (what the router
    calls), else its first interface."""
    for interface in record.card.interfaces:
        if interface.binding == "JSONRPC":
            return interface.url
    return record.card.interfaces[0].url


def _remote_keys(record: AgentRecord) -> bool:
    """Whether the card's verification rests on keys fetched from a URL (they expire and
    rotate without the trust store changing)."""
    source = record.verification.key_source or ""
    return bool(record.card.signatures) and source.startswith(("jwks:", "jku:"))


def _aware(value: datetime | None) -> datetime | None:
    return as_utc(value) if value is not None else None


def _not_found(agent_id: str) -> NotFound:
    return NotFound(f"no agent with id {agent_id!r}", details={"id": agent_id})


def _duplicate(existing: str, message: str) -> Conflict:
    return Conflict(message, code="duplicate_agent", details={"existing_id": existing})


def _sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def slugify(text: str) -> str:
    """An id-safe slug of ``text`` (ASCII, lower case, dashes), at most 48 characters."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    slug = re.sub(r"[^a-z0-9]+", "-", folded).strip("-")[:48].strip("-")
    return slug or "agent"


def _new_id(name: str, source: str, taken: set[str]) -> str:
    base = slugify(name)
    if base not in taken:
        return base
    candidate = f"{base}-{hashlib.sha256(source.encode()).hexdigest()[:6]}"
    n = 2
    while candidate in taken:
        candidate = f"{base}-{n}"
        n += 1
    return candidate
