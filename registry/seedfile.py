"""Seed files: the agents to register and the keys to trust when Switchboard starts, read
and validated (:mod:`registry.seeds` registers the agents, :class:`registry.trust.TrustStore`
trusts the keys).

A seed file is TOML (see ``seeds/README.md``)::

    [[agents]]
    url = "https://agents.example.com/currency"   # base URL or exact card URL
    id = "currency"                                 # optional
    refresh_interval = 60                           # optional, seconds (default schedule)

    [[agents]]
    card_file = "cards/legacy.json"                 # a card pushed from a file
                                                    # (relative to the seed file)

    [[keys]]                                        # a trusted signing key: an inline JWK,
    jwk = { kty = "OKP", crv = "Ed25519", x = "...", kid = "k1" }
    [[keys]]                                        # or a JWKS URL to trust
    jwks_url = "https://agents.example.com/.well-known/jwks.json"

Entries are validated when the file is loaded: :class:`RegistryError` ``bad_seed_file``
names the bad one.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from registry.errors import RegistryError, number
from registry.health import MAX_REFRESH_INTERVAL, MIN_REFRESH_INTERVAL

_AGENT_KEYS = {"url", "card_file", "id", "refresh_interval"}
_KEY_KEYS = {"jwk", "jwks_url"}


@dataclass(frozen=True)
class SeedAgent:
    """One agent entry of a seed file."""

    url: str | None = None
    card_file: Path | None = None
    id: str | None = None
    refresh_interval: float | None = None


@dataclass(frozen=True)
class SeedKey:
    """One trusted key entry of a seed file: an inline JWK or a JWKS URL."""

    jwk: dict[str, Any] | None = None
    jwks_url: str | None = None


@dataclass(frozen=True)
class SeedFile:
    """A parsed seed file."""

    agents: list[SeedAgent]
    keys: list[SeedKey]


def load_seed_file(path: str | Path) -> SeedFile:
    """Read and validate a seed file; :class:`RegistryError` names the bad entry."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise _bad(f"cannot read seed file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise _bad(f"seed file {path} is not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {"agents", "keys"})
    if unknown:
        raise _bad(
            f"seed file {path}: unknown top-level key {unknown[0]!r} "
            "(expected [[agents]] and [[keys]])"
        )
    for section in ("agents", "keys"):
        if not isinstance(data.get(section, []), list):
            raise _bad(f"seed file {path}: {section} must be [[{section}]] tables")
    return SeedFile(
        agents=[_entry(path, n, entry) for n, entry in enumerate(data.get("agents", []))],
        keys=[_key(path, n, entry) for n, entry in enumerate(data.get("keys", []))],
    )


def _bad(message: str) -> RegistryError:
    return RegistryError(message, code="bad_seed_file")


def _table(where: str, entry: object, allowed: set[str], one_of: tuple[str, str]) -> dict:
    """Check one [[...]] entry: a table, known keys only, exactly one of ``one_of``."""
    if not isinstance(entry, dict):
        raise _bad(f"{where}: must be a table")
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise _bad(f"{where}: unknown key {unknown[0]!r}")
    first, second = one_of
    if (first in entry) == (second in entry):
        raise _bad(f"{where}: give exactly one of {first} or {second}")
    return entry


def _entry(path: Path, n: int, raw: object) -> SeedAgent:
    where = f"seed file {path}, agents[{n}]"
    entry = _table(where, raw, _AGENT_KEYS, ("url", "card_file"))
    for key in (_AGENT_KEYS - {"refresh_interval"}) & set(entry):
        if not isinstance(entry[key], str) or not entry[key]:
            raise _bad(f"{where}: {key} must be a non-empty string")
    interval = entry.get("refresh_interval")
    if interval is not None and (
        isinstance(interval, bool)
        or not isinstance(interval, int | float)
        or not MIN_REFRESH_INTERVAL <= interval <= MAX_REFRESH_INTERVAL
    ):
        raise _bad(
            f"{where}: refresh_interval must be a number of seconds, "
            f"{number(MIN_REFRESH_INTERVAL)} to {number(MAX_REFRESH_INTERVAL)}"
        )
    card_file = entry.get("card_file")
    return SeedAgent(
        url=entry.get("url"),
        card_file=(path.parent / card_file) if card_file else None,
        id=entry.get("id"),
        refresh_interval=float(interval) if interval is not None else None,
    )


def _key(path: Path, n: int, raw: object) -> SeedKey:
    where = f"seed file {path}, keys[{n}]"
    entry = _table(where, raw, _KEY_KEYS, ("jwk", "jwks_url"))
    if "jwk" in entry:
        jwk = entry["jwk"]
        if not isinstance(jwk, dict) or not isinstance(jwk.get("kty"), str):
            raise _bad(f"{where}: jwk must be a table with at least kty (a JSON Web Key)")
        return SeedKey(jwk=dict(jwk))
    url = entry["jwks_url"]
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        raise _bad(f"{where}: jwks_url must be an http(s) URL")
    return SeedKey(jwks_url=url)
