"""Seed files: the agents to register when Switchboard starts.

A seed file is TOML (see ``seeds/README.md``)::

    [[agents]]
    url = "https://agents.example.com/currency"   # base URL or exact card URL
    id = "currency"                                 # optional

    [[agents]]
    card_file = "cards/legacy.json"                 # a card pushed from a file
                                                    # (relative to the seed file)

Agents already registered from the same source are left as they are, so a seed file can be
loaded at every start. An agent that cannot be fetched is logged and skipped; it does not
stop the server.
"""

from __future__ import annotations

import json
import logging
import tomllib
from dataclasses import dataclass
from pathlib import Path

from registry.errors import Conflict, RegistryError
from registry.service import Registry

log = logging.getLogger(__name__)

_AGENT_KEYS = {"url", "card_file", "id"}


@dataclass(frozen=True)
class SeedAgent:
    """One agent entry of a seed file."""

    url: str | None = None
    card_file: Path | None = None
    id: str | None = None


def load_seed_file(path: str | Path) -> list[SeedAgent]:
    """Read and validate a seed file; :class:`RegistryError` names the bad entry."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise _bad(f"cannot read seed file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise _bad(f"seed file {path} is not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {"agents"})
    if unknown:
        raise _bad(f"seed file {path}: unknown top-level key {unknown[0]!r} (expected [[agents]])")
    entries = data.get("agents", [])
    if not isinstance(entries, list):
        raise _bad(f"seed file {path}: agents must be [[agents]] tables")
    return [_entry(path, n, entry) for n, entry in enumerate(entries)]


def _bad(message: str) -> RegistryError:
    return RegistryError(message, code="bad_seed_file")


def _entry(path: Path, n: int, entry: object) -> SeedAgent:
    where = f"seed file {path}, agents[{n}]"
    if not isinstance(entry, dict):
        raise _bad(f"{where}: must be a table")
    unknown = sorted(set(entry) - _AGENT_KEYS)
    if unknown:
        raise _bad(f"{where}: unknown key {unknown[0]!r}")
    if ("url" in entry) == ("card_file" in entry):
        raise _bad(f"{where}: give exactly one of url or card_file")
    for key in _AGENT_KEYS & set(entry):
        if not isinstance(entry[key], str) or not entry[key]:
            raise _bad(f"{where}: {key} must be a non-empty string")
    card_file = entry.get("card_file")
    return SeedAgent(
        url=entry.get("url"),
        card_file=(path.parent / card_file) if card_file else None,
        id=entry.get("id"),
    )


async def apply_seeds(registry: Registry, agents: list[SeedAgent]) -> list[str]:
    """Register each seed agent not yet registered; return the ids registered now."""
    added = []
    for seed in agents:
        try:
            if seed.id and seed.id in registry.catalog.snapshot.agents:
                continue
            if seed.url:
                if await registry.store.id_for_source(seed.url):
                    continue
                record = await registry.register_url(seed.url, seed.id)
            else:
                assert seed.card_file is not None
                data = json.loads(seed.card_file.read_text(encoding="utf-8"))
                record = await registry.register_card(data, seed.id)
        except Conflict as exc:
            log.info("seed agent %s already registered: %s", seed.url or seed.card_file, exc)
            continue
        except (RegistryError, OSError, ValueError) as exc:
            log.warning("seed agent %s not registered: %s", seed.url or seed.card_file, exc)
            continue
        log.info("registered seed agent %s from %s", record.id, seed.url or seed.card_file)
        added.append(record.id)
    return added
