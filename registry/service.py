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
from typing import Any

from sqlalchemy.exc import IntegrityError

from registry.cards import AgentCard, parse_card
from registry.catalog import Catalog
from registry.crawler import Crawler, Fetched, is_card_url
from registry.errors import CardError, Conflict, NotFound, RegistryError
from registry.jsonsafe import JsonLimitError, loads_limited
from registry.records import AgentRecord, Source, VerificationRecord, utcnow
from registry.signatures import KeyResolver, StaticKeys, verify_card
from registry.store import Store
from registry.trust import TrustAnchorRow  # noqa: F401 - its table must exist with the schema

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
    ) -> None:
        self.store = store
        self.crawler = crawler
        self.catalog = catalog or Catalog()
        self.max_card_bytes = max_card_bytes
        self.keys: KeyResolver = keys or StaticKeys([])
        self.require_signed = require_signed
        self._key_generation = 0
        self._reverify_lock = asyncio.Lock()

    async def load(self) -> None:
        """Create the schema if needed and load the catalog from the database."""
        await self.store.create_schema()
        await self.reload()

    async def reload(self) -> None:
        """Rebuild the in-memory catalog from the database."""
        version = await self.store.catalog_version()  # read first: records are at least as new
        self.catalog.replace(await self.store.all(), version)

    async def sync(self) -> bool:
        """Reload if another process changed the catalog; True if it did."""
        if await self.store.catalog_version() == self.catalog.snapshot.version:
            return False
        await self.reload()
        return True

    def routable(self, record: AgentRecord) -> bool:
        """Whether routing may choose this agent (``SWITCHBOARD_REQUIRE_SIGNED_CARDS`` policy).

        Unverified agents stay in the catalog either way.
        """
        return not self.require_signed or record.verification.status == "verified"

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
        result = await self.store.update(updated, raw, expected_sha256=record.card_sha256)
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

    async def register_url(self, url: str, agent_id: str | None = None) -> AgentRecord:
        """Register the agent at a base URL (well-known discovery) or an exact card URL."""
        await self.sync()
        self._check_new_id(agent_id)
        existing = await self.store.id_for_source(url)
        if existing:
            raise _duplicate(existing, f"{url} is already registered as agent {existing!r}")
        source: Source = "card_url" if is_card_url(url) else "url"
        if source == "card_url":
            fetched = await self.crawler.fetch_card(url)
        else:
            fetched = await self.crawler.discover(url)
        generation = self._key_generation
        card, verification = await self.check(fetched.data)
        record = await self._create(card, fetched.raw, source, url, fetched, agent_id, verification)
        return await self._recheck_if_keys_changed(record, generation)

    async def register_card(self, data: Any, agent_id: str | None = None) -> AgentRecord:
        """Register a card pushed as JSON (it cannot be refreshed by fetching)."""
        await self.sync()
        self._check_new_id(agent_id)
        raw = self._raw(data)
        generation = self._key_generation
        card, verification = await self.check(data)
        record = await self._create(card, raw, "push", None, None, agent_id, verification)
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
        record = (await self._update(record, raw))[0]
        return await self._recheck_if_keys_changed(record, generation)

    async def refresh(self, agent_id: str) -> tuple[AgentRecord, bool]:
        """Fetch an agent's card again (conditionally); return the record and whether it changed."""
        await self.sync()
        current = self.get(agent_id)
        if current.source == "push" or not current.source_url:
            raise RegistryError(
                f"agent {agent_id!r} was pushed, not crawled; PUT a new card instead",
                code="not_crawled",
                status=409,
            )
        conditional = {"etag": current.etag, "last_modified": current.last_modified}
        if current.source == "card_url":
            fetched = await self.crawler.fetch_card(current.source_url, **conditional)
        else:
            fetched = await self.crawler.discover(current.source_url, **conditional)
        now = utcnow()
        generation = self._key_generation
        if fetched.not_modified:
            raw = await self.raw_card(agent_id)
            # the card is the same, but keys may have expired or rotated: check it again
            card, verification = await self.check(loads_limited(raw, max_depth=256))
            record = current.model_copy(
                update={"fetched_at": now, "card": card, "verification": verification}
            )
        else:
            raw = fetched.raw
            changed = _sha(raw) != current.card_sha256
            card, verification = await self.check(fetched.data)
            if changed:
                self._check_interfaces(card, exclude=agent_id)
            record = current.model_copy(
                update={
                    "card": card,
                    "verification": verification,
                    "card_sha256": _sha(raw),
                    "card_url": fetched.url,
                    "etag": fetched.etag,
                    "last_modified": fetched.last_modified,
                    "fetched_at": now,
                    "updated_at": now if changed else current.updated_at,
                }
            )
        record, changed = await self._update(record, raw)
        return await self._recheck_if_keys_changed(record, generation), changed

    async def remove(self, agent_id: str) -> None:
        """Delete an agent from the index."""
        version = await self.store.delete(agent_id)
        if version is None:
            raise _not_found(agent_id)
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
            try:
                version = await self.store.insert(record, raw)
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
            return record
        raise Conflict(
            "could not choose a free agent id; try again",
            code="duplicate_agent",
            details={"id": agent_id},
        )

    async def _update(self, record: AgentRecord, raw: bytes) -> tuple[AgentRecord, bool]:
        result = await self.store.update(record, raw)
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
