"""The registry service: register, replace and remove agents; keep the catalog in step.

:class:`Registry` composes the crawler (fetch), the card readers (normalize), the verifier
(:mod:`registry.verification`), the store (persist), the catalog (serve reads) and the
upkeep of every agent (health checks and card refreshes: :mod:`registry.upkeep`). The admin
API, the CLI's ``serve`` and the seeds loader all go through it.

Consistency: the database is the truth. Each write returns the catalog version it produced;
the in-memory snapshot takes the written record directly when it was one version behind;
when another process wrote in between, it reads only the agents the change log names for the
versions it missed (:meth:`Registry.sync`), and reloads everything only when that log does
not cover them.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.exc import IntegrityError

from registry.cards import AgentCard
from registry.catalog import Catalog, Snapshot
from registry.crawler import Crawler, Fetched, is_card_url
from registry.diff import agent_diff
from registry.errors import Conflict, RegistryError, agent_not_found
from registry.health import Health, RefreshPolicy
from registry.indexing import IndexFollower
from registry.metrics import counted_crawl
from registry.records import AgentRecord, Source, VerificationRecord, utcnow
from registry.signatures import KeyResolver
from registry.store import Store
from registry.upkeep import Upkeep
from registry.vectors import SkillVectors
from registry.verification import Verifier

_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_ID_ATTEMPTS = 5


class Registry:
    """Agent registration and the catalog view; one per process.

    Verification (:attr:`verifier`, :mod:`registry.verification`) and health checks
    (:attr:`upkeep`, :mod:`registry.upkeep`) are its parts; the methods many callers use
    (:meth:`health_of`, :meth:`report_failure`, :meth:`reverify_all`) are kept here.
    """

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
        index_quiet: float = 0.0,
        index_max_delay: float = 30.0,
        meaning: bool = False,
    ) -> None:
        """``meaning``: skills are routed by their vectors (``SWITCHBOARD_MATCHER=semantic``),
        so a write is done once its skills' vectors are (:meth:`vectors_of`)."""
        self.store = store
        self.crawler = crawler
        self.catalog = catalog or Catalog()
        self.max_card_bytes = max_card_bytes
        self.require_signed = require_signed
        self.policy = policy or RefreshPolicy()
        self.verifier = Verifier(self, keys)
        self.upkeep = Upkeep(self, self.verifier, self.policy)
        self.on_index: Callable[[Snapshot], Awaitable[Any]] | None = None
        """Called with the new snapshot after catalog changes made or read by this process
        (the router embeds new skill texts there: :mod:`registry.vectors`), in the background:
        a write answers before it; changes made while a call runs share the next one. Wait
        for it with :meth:`indexed`."""
        self.indexing = IndexFollower(
            self.catalog, lambda: self.on_index, quiet=index_quiet, max_delay=index_max_delay
        )
        self.meaning = meaning
        self.vectors: SkillVectors | None = None
        """The skills' vectors, once the model is loaded (with :attr:`on_index`)."""

    async def load(self) -> None:
        """Create the schema if needed and load the catalog from the database; agents
        registered by a version without scheduled refresh get a schedule."""
        await self.store.create_schema()
        await self.store.adopt_missing(
            lambda agent_id, source: self.upkeep.new_refresh_row(agent_id, source, None, None)  # type: ignore[arg-type]
        )
        await self.reload()

    async def reload(self) -> None:
        """Rebuild the in-memory catalog (and the health of every agent) from the database."""
        version = await self.store.catalog_version()  # read first: records are at least as new
        self.catalog.replace(await self.store.all(), version)
        await self.upkeep.reload_health(full=True)
        self.indexing.poke()

    async def sync(self, versions: tuple[int, int] | None = None) -> bool:
        """Reload what another process changed (catalog, health); True if the catalog
        changed. ``versions``: the catalog's and the health's counters if the caller has just
        read them (:meth:`Store.counters`)."""
        catalog_version, health_version = versions or await self.store.versions()
        if catalog_version != self.catalog.snapshot.version:
            await self._catch_up(catalog_version)
            return True
        if health_version != self.upkeep.version:
            await self.upkeep.reload_health(full=False)
        return False

    async def _catch_up(self, version: int) -> None:
        """Apply only the agents other processes changed since the snapshot (the change log,
        :meth:`Store.changes_since`); reload everything when the log cannot tell."""
        known = self.catalog.snapshot.version
        changes = await self.store.changes_since(known) if version > known else None
        if changes is None:
            await self.reload()
            return
        version, records = changes
        self.catalog.apply(records, version)
        for agent_id, record in records.items():
            if record is None:
                self.upkeep.forget(agent_id)
        await self.upkeep.reload_health(full=False)
        self.indexing.poke()

    def health_of(self, agent_id: str) -> Health:
        """The agent's current health (``unknown`` if nothing was recorded yet)."""
        return self.upkeep.health_of(agent_id)

    async def report_failure(self, agent_id: str, error: str) -> Health | None:
        """Passive health: the router could not reach the agent (see
        :meth:`Upkeep.report_failure`)."""
        return await self.upkeep.report_failure(agent_id, error)

    async def reverify_all(self) -> int:
        """Check every agent's card again after the trusted keys changed (see
        :meth:`Verifier.reverify_all`); how many verification results changed."""
        return await self.verifier.reverify_all()

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

    def get(self, agent_id: str) -> AgentRecord:
        """An agent from the catalog, or :class:`NotFound`."""
        record = self.catalog.snapshot.agents.get(agent_id)
        if record is None:
            raise agent_not_found(agent_id)
        return record

    async def raw_card(self, agent_id: str) -> bytes:
        """The agent's card bytes as fetched or pushed."""
        raw = await self.store.raw_card(agent_id)
        if raw is None:
            raise agent_not_found(agent_id)
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
        with counted_crawl():
            if source == "card_url":
                fetched = await self.crawler.fetch_card(url)
            else:
                fetched = await self.crawler.discover(url)
        generation = self.verifier.generation
        card, verification = await self.verifier.check(fetched.data)
        record = await self._create(
            card, fetched.raw, source, url, fetched, agent_id, verification, refresh_interval
        )
        return await self.verifier.recheck_if_keys_changed(record, generation)

    async def register_card(
        self, data: Any, agent_id: str | None = None, *, refresh_interval: float | None = None
    ) -> AgentRecord:
        """Register a card pushed as JSON (it cannot be refreshed by fetching; its health is
        checked by probing its endpoint)."""
        await self.sync()
        self._check_new_id(agent_id)
        raw = self._raw(data)
        generation = self.verifier.generation
        card, verification = await self.verifier.check(data)
        record = await self._create(
            card, raw, "push", None, None, agent_id, verification, refresh_interval
        )
        return await self.verifier.recheck_if_keys_changed(record, generation)

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
        generation = self.verifier.generation
        card, verification = await self.verifier.check(data)
        self.check_interfaces(card, exclude=agent_id)
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
        return await self.verifier.recheck_if_keys_changed(record, generation)

    async def remove(self, agent_id: str) -> None:
        """Delete an agent from the index."""
        version = await self.store.delete(agent_id)
        if version is None:
            raise agent_not_found(agent_id)
        self.upkeep.forget(agent_id)
        if not self.catalog.remove(agent_id, version):
            await self._catch_up(version)  # another process wrote in between
        else:
            self.indexing.poke()

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
        self.check_interfaces(card)
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
            refresh = self.upkeep.new_refresh_row(chosen, source, refresh_interval, max_age)
            try:
                version = await self.store.insert(record, raw, refresh)
            except IntegrityError:
                # another request (or replica) took the id or the source meanwhile
                await self.reload()
                if source_url and (owner := await self.store.id_for_source(source_url)):
                    message = f"{source_url} is already registered as {owner!r}"
                    raise _duplicate(owner, message) from None
                self._check_new_id(agent_id)
                self.check_interfaces(card)
                continue
            await self.install(record, version)
            self.upkeep.install_health(refresh, chosen)
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
            raise agent_not_found(record.id)
        changed, version = result
        await self.install(record, version)
        return record, changed

    async def install(self, record: AgentRecord, version: int) -> None:
        """Put a record written at catalog ``version`` in the catalog (with what another
        process wrote in between, if it did)."""
        if not self.catalog.upsert(record, version):
            await self._catch_up(version)  # another process wrote in between
        else:
            self.indexing.poke()

    async def indexed(self, version: int | None = None) -> int:
        """Wait until :attr:`on_index` has run on a snapshot at least ``version`` new
        (default: the current one), e.g. a registration's skill texts are embedded; the
        catalog version it reached (see :class:`IndexFollower`)."""
        return await self.indexing.wait(version)

    async def vectors_of(self, record: AgentRecord) -> str | None:
        """Once every text of ``record`` has its vector stored: ``"ready"``; ``"pending"``
        when the model is not loaded yet or the embedding failed (they are computed as soon
        as they can be); None when routing goes by words (``SWITCHBOARD_MATCHER=lexical``)."""
        if not self.meaning:
            return None
        if self.vectors is None:
            return "pending"
        await self.indexed()
        return "ready" if self.vectors.has_all(record) else "pending"

    def check_interfaces(self, card: AgentCard, exclude: str | None = None) -> None:
        """Refuse a card whose endpoint (URL and tenant) another agent already has."""
        snapshot = self.catalog.snapshot
        clashes = [
            (other, str(key), key)
            for key in {(i.url, i.tenant) for i in card.interfaces}
            for other in snapshot.interface_owners(*key)
            if other != exclude
        ]
        if clashes:
            other, _, (url, tenant) = min(clashes)
            where = f"{url} (tenant {tenant})" if tenant else url
            raise _duplicate(other, f"interface {where} is already registered as agent {other!r}")


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
