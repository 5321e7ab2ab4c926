"""Seed agents: register the agents of seed files (:mod:`registry.seedfile`) at start.

Agents already registered from the same source are left as they are, so a seed file can be
loaded at every start; an agent another process (a replica, a worker) registered from it
meanwhile is read into this process's catalog at once. An agent that cannot be fetched is
logged and skipped; it does not stop the server (the scheduled refresh does not retry it: it is
tried again at the next start).
"""

from __future__ import annotations

import logging

from registry.errors import Conflict, RegistryError
from registry.jsonsafe import JsonLimitError, loads_limited
from registry.netguard import redact_url
from registry.seedfile import SeedAgent
from registry.service import Registry

log = logging.getLogger(__name__)

_MAX_CARD_DEPTH = 64


def _shown(seed: SeedAgent) -> str:
    """How a seed entry appears in logs: never with credentials of its URL."""
    return redact_url(seed.url) if seed.url else str(seed.card_file)


async def apply_seeds(registry: Registry, agents: list[SeedAgent]) -> list[str]:
    """Register each seed agent not yet registered; return the ids registered now."""
    added = []
    elsewhere = False  # registered by another process since this one loaded its catalog
    for seed in agents:
        try:
            if seed.id and seed.id in registry.catalog.snapshot.agents:
                log.info("seed agent id %r is already registered; left as it is", seed.id)
                continue
            if seed.url:
                if await registry.store.id_for_source(seed.url):
                    elsewhere = True
                    continue
                record = await registry.register_url(
                    seed.url, seed.id, refresh_interval=seed.refresh_interval
                )
            else:
                assert seed.card_file is not None
                data = loads_limited(seed.card_file.read_bytes(), max_depth=_MAX_CARD_DEPTH)
                record = await registry.register_card(
                    data, seed.id, refresh_interval=seed.refresh_interval
                )
        except Conflict as exc:
            log.info("seed agent %s already registered: %s", _shown(seed), exc)
            elsewhere = True
            continue
        except (RegistryError, OSError, JsonLimitError) as exc:
            log.warning("seed agent %s not registered: %s", _shown(seed), exc)
            continue
        log.info("registered seed agent %s from %s", record.id, _shown(seed))
        added.append(record.id)
    if elsewhere:
        await registry.sync()  # not within SWITCHBOARD_CATALOG_SYNC_INTERVAL: now
    return added
