"""The state a process keeps in memory and reads again when another process wrote it: the
catalog (and each agent's health), access policies, outbound credentials, learned examples
and trusted keys, and the skill vectors that come with the catalog.

:meth:`SharedState.sync` reads each part's counter and reloads only the parts that moved; it
is what a worker runs to catch up (:class:`router.coherence.sync.Coherence`) and what the
poll runs every ``SWITCHBOARD_CATALOG_SYNC_INTERVAL``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from registry.access.credentials import AgentCredentials
from registry.access.policy import Policies
from registry.examples import LearnedExamples
from registry.service import Registry
from registry.store import CATALOG_VERSION, HEALTH_VERSION
from registry.trust import TrustStore

__all__ = ["SharedState"]

log = logging.getLogger(__name__)


@dataclass
class SharedState:
    """The parts of a process's memory that other processes write (see the module docs)."""

    registry: Registry
    policies: Policies
    credentials: AgentCredentials
    examples: LearnedExamples
    trust: TrustStore
    embed_examples: Callable[[], Awaitable[object]]
    """Embeds the learned examples not embedded yet (nothing without a model)."""

    async def sync(self) -> list[str]:
        """Reload what other processes changed; the names of the parts that changed. Returns
        once new skill texts have their vectors (with a model), so that a request after it
        is routed by meaning."""
        changed = []
        registry = self.registry
        counters = await registry.store.counters()  # every part's, in one query
        versions = (counters.get(CATALOG_VERSION, 0), counters.get(HEALTH_VERSION, 0))
        if await registry.sync(versions):  # another process changed the catalog
            changed.append("catalog")
            log.info("catalog reloaded at version %d", registry.catalog.snapshot.version)
        if await self.policies.sync(counters.get(self.policies.VERSION_KEY)):
            changed.append("policies")
            log.info("access policies reloaded")
        if await self.credentials.sync(counters.get(self.credentials.VERSION_KEY)):
            changed.append("credentials")
        if await self.examples.sync(counters.get(self.examples.VERSION_KEY)):
            changed.append("examples")
            await self.embed_examples()
        if await self.trust.reload():
            changed.append("keys")
            log.info("trusted keys changed: %d agent(s) re-verified", await registry.reverify_all())
        if "catalog" in changed or "keys" in changed:
            await registry.indexed()  # the new skills' vectors (stored by the writer: read)
        return changed
