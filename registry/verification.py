"""Card verification in the registry: a card's signatures checked against the trusted keys,
and every agent checked again when those keys change.

:class:`Verifier` turns :func:`registry.signatures.verify_card` into the
:class:`~registry.records.VerificationRecord` stored with each agent, and re-verifies the
stored cards after a change of keys (the admin API's keys routes, seed keys at start).
A change of keys while a card is being checked makes its writer check it again
(:meth:`Verifier.recheck_if_keys_changed`), so the last keys always win.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from registry.cards import AgentCard, parse_card
from registry.catalog import Catalog
from registry.diff import agent_diff
from registry.errors import CardError
from registry.jsonsafe import JsonLimitError, loads_limited
from registry.metrics import counted_verification
from registry.records import AgentRecord, VerificationRecord
from registry.signatures import KeyResolver, StaticKeys, verify_card
from registry.store import Store

log = logging.getLogger(__name__)


class AgentIndex(Protocol):
    """What re-verification needs of the registry (:class:`registry.service.Registry`): the
    store, the catalog, catching up with other processes and installing a written record."""

    store: Store
    catalog: Catalog

    async def sync(self) -> bool:
        """Reload what another process changed; True if the catalog changed."""
        ...

    async def install(self, record: AgentRecord, version: int) -> None:
        """Put a record written at catalog ``version`` in the in-memory catalog."""
        ...


class Verifier:
    """Checks cards against the trusted keys and re-verifies every agent when they change."""

    def __init__(self, agents: AgentIndex, keys: KeyResolver | None = None) -> None:
        self.agents = agents
        self.keys: KeyResolver = keys or StaticKeys([])
        self.generation = 0
        """Grows with every change of keys; a writer compares it before and after a check."""
        self._lock = asyncio.Lock()

    @counted_verification
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
        self.generation += 1
        async with self._lock:
            changed = 0
            while True:
                generation = self.generation
                await self.agents.sync()
                for record in list(self.agents.catalog.snapshot.agents.values()):
                    changed += await self._reverify(record.id)
                if generation == self.generation:
                    return changed

    async def recheck_if_keys_changed(self, record: AgentRecord, generation: int) -> AgentRecord:
        """If the trusted keys changed while ``record`` was being checked (``generation`` is
        what :attr:`generation` was before), check it again (a re-verification that ran
        meanwhile could not see it yet); return the agent as the catalog now has it."""
        if generation != self.generation:
            async with self._lock:
                await self._reverify(record.id)
        return self.agents.catalog.snapshot.agents.get(record.id, record)

    async def _reverify(self, agent_id: str) -> int:
        """Re-check one agent's stored card; 1 if its verification changed, else 0."""
        record = self.agents.catalog.snapshot.agents.get(agent_id)
        raw = await self.agents.store.raw_card(agent_id)
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
        result = await self.agents.store.update(
            updated, raw, expected_sha256=record.card_sha256, diff=agent_diff(record, updated)
        )
        if result is None:
            return 0
        await self.agents.install(updated, result[1])
        return 1
