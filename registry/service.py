"""The registry service: register, refresh and remove agents; keep the catalog in step.

It composes the crawler (fetch), the card readers (normalize), the store (persist) and the
catalog (serve reads). The admin API, the CLI's ``serve`` and the seeds loader all go
through it.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from typing import Any

from sqlalchemy.exc import IntegrityError

from registry.cards import AgentCard, parse_card
from registry.catalog import Catalog
from registry.crawler import Crawler, Fetched, is_card_url
from registry.errors import Conflict, NotFound, RegistryError
from registry.records import AgentRecord, Source, utcnow
from registry.store import Store

_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


class Registry:
    """Agent registration and the catalog view; one per process."""

    def __init__(self, store: Store, crawler: Crawler, catalog: Catalog | None = None) -> None:
        self.store = store
        self.crawler = crawler
        self.catalog = catalog or Catalog()

    async def load(self) -> None:
        """Create the schema if needed and load the catalog from the database."""
        await self.store.create_schema()
        await self.reload()

    async def reload(self) -> None:
        """Rebuild the in-memory catalog from the database."""
        version = await self.store.catalog_version()
        self.catalog.replace(await self.store.all(), version)

    def get(self, agent_id: str) -> AgentRecord:
        """An agent from the catalog, or :class:`NotFound`."""
        record = self.catalog.snapshot.agents.get(agent_id)
        if record is None:
            raise NotFound(f"no agent with id {agent_id!r}", details={"id": agent_id})
        return record

    async def raw_card(self, agent_id: str) -> bytes:
        """The agent's card bytes as fetched or pushed."""
        raw = await self.store.raw_card(agent_id)
        if raw is None:
            raise NotFound(f"no agent with id {agent_id!r}", details={"id": agent_id})
        return raw

    async def register_url(self, url: str, agent_id: str | None = None) -> AgentRecord:
        """Register the agent at a base URL (well-known discovery) or an exact card URL."""
        source: Source = "card_url" if is_card_url(url) else "url"
        existing = await self.store.id_for_source(url)
        if existing:
            raise _duplicate(existing, f"{url} is already registered as agent {existing!r}")
        if source == "card_url":
            fetched = await self.crawler.fetch_card(url)
        else:
            fetched = await self.crawler.discover(url)
        card = parse_card(fetched.data)
        return await self._create(card, fetched.raw, source, url, fetched, agent_id)

    async def register_card(self, data: Any, agent_id: str | None = None) -> AgentRecord:
        """Register a card pushed as JSON (it cannot be refreshed by fetching)."""
        card = parse_card(data)
        raw = json.dumps(data, ensure_ascii=False).encode()
        return await self._create(card, raw, "push", None, None, agent_id)

    async def replace_card(self, agent_id: str, data: Any) -> AgentRecord:
        """Replace the card of a pushed agent with a new one."""
        current = self.get(agent_id)
        if current.source != "push":
            raise RegistryError(
                f"agent {agent_id!r} is crawled from {current.source_url}; refresh it instead",
                code="not_pushed",
                status=409,
            )
        card = parse_card(data)
        raw = json.dumps(data, ensure_ascii=False).encode()
        now = utcnow()
        record = current.model_copy(
            update={"card": card, "card_sha256": _sha(raw), "updated_at": now, "fetched_at": now}
        )
        await self.store.save(record, raw)
        await self._installed(record)
        return record

    async def refresh(self, agent_id: str) -> tuple[AgentRecord, bool]:
        """Fetch an agent's card again (conditionally); return the record and whether it changed."""
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
        if fetched.not_modified:
            record = current.model_copy(update={"fetched_at": now})
            raw = await self.raw_card(agent_id)
        else:
            raw = fetched.raw
            changed = _sha(raw) != current.card_sha256
            record = current.model_copy(
                update={
                    "card": parse_card(fetched.data) if changed else current.card,
                    "card_sha256": _sha(raw),
                    "card_url": fetched.url,
                    "etag": fetched.etag,
                    "last_modified": fetched.last_modified,
                    "fetched_at": now,
                    "updated_at": now if changed else current.updated_at,
                }
            )
        changed = await self.store.save(record, raw)
        await self._installed(record)
        return record, changed

    async def remove(self, agent_id: str) -> None:
        """Delete an agent from the index."""
        if not await self.store.delete(agent_id):
            raise NotFound(f"no agent with id {agent_id!r}", details={"id": agent_id})
        self.catalog.remove(agent_id, await self.store.catalog_version())

    async def _create(
        self,
        card: AgentCard,
        raw: bytes,
        source: Source,
        source_url: str | None,
        fetched: Fetched | None,
        agent_id: str | None,
    ) -> AgentRecord:
        self._check_interfaces(card)
        taken = await self.store.ids()
        if agent_id is not None:
            _check_id(agent_id)
            if agent_id in taken:
                raise _duplicate(agent_id, f"an agent with id {agent_id!r} already exists")
        else:
            agent_id = _new_id(card.name, source_url or card.interfaces[0].url, taken)
        now = utcnow()
        record = AgentRecord(
            id=agent_id,
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
        )
        try:
            await self.store.save(record, raw)
        except IntegrityError:
            raise Conflict(
                "the agent was registered concurrently by another request",
                code="duplicate_agent",
                details={"id": agent_id, "source_url": source_url},
            ) from None
        await self._installed(record)
        return record

    async def _installed(self, record: AgentRecord) -> None:
        """Put a just-saved record into the in-memory catalog."""
        self.catalog.upsert(record, await self.store.catalog_version())

    def _check_interfaces(self, card: AgentCard) -> None:
        urls = {i.url for i in card.interfaces}
        for other in self.catalog.snapshot.agents.values():
            shared = urls & {i.url for i in other.card.interfaces}
            if shared:
                url = sorted(shared)[0]
                raise _duplicate(
                    other.id, f"interface {url} is already registered as agent {other.id!r}"
                )


def _duplicate(existing: str, message: str) -> Conflict:
    return Conflict(message, code="duplicate_agent", details={"existing_id": existing})


def _sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _check_id(agent_id: str) -> None:
    if not _ID.match(agent_id):
        raise RegistryError(
            "an agent id is 1 to 64 characters of a-z, 0-9, '.', '_' and '-', "
            "starting with a letter or digit",
            code="invalid_id",
            details={"id": agent_id},
        )


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
