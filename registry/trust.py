"""The trust store: the public keys Switchboard accepts card signatures from.

Trust anchors are public JWKs and JWKS URLs, added through the admin API (``/api/v1/keys``)
or from seed files, and kept in the ``trust_anchors`` table (each process holds them in
memory; :meth:`TrustStore.reload` picks up other replicas' changes). A card's own ``jku`` is
followed only when it is on ``SWITCHBOARD_TRUSTED_JKU`` (:mod:`registry.jku`); JWKS
documents are fetched and cached by :mod:`registry.jwks`. A kid found among the trusted JWKs
fetches nothing; otherwise a lookup waits at most ``lookup_timeout`` seconds for the JWKS.

No private key material is ever stored: posted JWKs carrying private parameters are refused,
and symmetric (``oct``) keys are never trusted (:func:`registry.jwkeys.public_jwk`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from jwcrypto.jwk import JWK
from sqlalchemy.exc import IntegrityError
from sqlmodel import select
from yarl import URL

from registry.crawler import Crawler
from registry.errors import Conflict, NotFound, RegistryError
from registry.jku import MAX_URL, TrustedJku
from registry.jwkeys import current, expired, public_jwk
from registry.jwks import CACHE_SIZE, HOST_CONCURRENCY, JwksCache
from registry.netguard import redact_url
from registry.records import as_utc, iso, utcnow
from registry.seedfile import SeedKey
from registry.signatures import KeyLookup
from registry.store import Store
from registry.tables import TrustAnchorRow

__all__ = ["LOOKUP_TIMEOUT", "Anchor", "TrustStore", "jwks_anchor_id"]

log = logging.getLogger(__name__)

LOOKUP_TIMEOUT = 10.0  # the longest a key lookup waits for JWKS fetches

Kind = Literal["jwk", "jwks_url"]
Source = Literal["api", "seed"]


# --- the table -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Anchor:
    """A trust anchor as held in memory; ``key`` is the parsed public JWK (kind "jwk")."""

    id: str
    kind: Kind
    kid: str | None
    jwk: dict[str, Any] | None
    jwks_url: str | None
    source: Source
    created_at: datetime
    key: JWK | None = field(default=None, repr=False, compare=False)

    def to_api(self) -> dict[str, Any]:
        """The admin API's view of this anchor."""
        jwk = self.jwk or {}
        return {
            "id": self.id,
            "kind": self.kind,
            "kid": self.kid,
            "kty": jwk.get("kty"),
            "alg": jwk.get("alg"),
            "jwk": self.jwk,
            "jwks_url": self.jwks_url,
            "source": self.source,
            "created_at": iso(self.created_at),
        }

    def matches(self, kid: str) -> bool:
        """Whether this JWK anchor answers to ``kid`` (its thumbprint when it has no kid)."""
        return self.kind == "jwk" and (self.kid == kid or (self.kid is None and self.id == kid))


def _same(known: Anchor | None, row: TrustAnchorRow) -> Anchor | None:
    """``known`` if ``row`` stores what it was made from, else None."""
    if known is None or (known.kind, known.kid, known.jwks_url) != (
        row.kind,
        row.kid,
        row.jwks_url,
    ):
        return None
    return known if known.jwk == (dict(row.jwk) if row.jwk else None) else None


def _anchor(row: TrustAnchorRow) -> Anchor:
    key = None
    if row.kind == "jwk" and row.jwk:
        try:
            key = JWK(**row.jwk)
        except Exception:  # only validated keys are stored; a hand-edited row is skipped
            log.warning("trust anchor %s holds an unusable JWK; it is ignored", row.id)
    return Anchor(
        id=row.id,
        kind=row.kind,  # type: ignore[arg-type]
        kid=row.kid,
        jwk=dict(row.jwk) if row.jwk else None,
        jwks_url=row.jwks_url,
        source=row.source,  # type: ignore[arg-type]
        created_at=as_utc(row.created_at),
        key=key,
    )


def jwks_anchor_id(url: str) -> str:
    """The anchor id of a JWKS URL: ``jwks-`` and 16 hex digits of its SHA-256."""
    return "jwks-" + hashlib.sha256(url.encode("utf-8", "surrogateescape")).hexdigest()[:16]


# --- the store -------------------------------------------------------------------------------


class TrustStore:
    """Trusted signing keys; resolves the keys a card signature may be verified with.

    Implements the ``KeyResolver`` protocol of :mod:`registry.signatures`. ``timer`` (a
    monotonic clock in seconds) drives the JWKS cache, so tests can move time;
    ``lookup_timeout`` bounds how long :meth:`keys_for` waits for JWKS fetches and
    ``host_concurrency`` how many JWKS fetches run at once per host.
    """

    def __init__(
        self,
        store: Store,
        crawler: Crawler,
        trusted_jku: list[str],
        *,
        timer: Callable[[], float] = time.monotonic,
        cache_size: int = CACHE_SIZE,
        lookup_timeout: float = LOOKUP_TIMEOUT,
        host_concurrency: int = HOST_CONCURRENCY,
    ) -> None:
        self.store = store
        self.crawler = crawler
        self.trusted_jku = trusted_jku
        self.lookup_timeout = lookup_timeout
        self._anchors: dict[str, Anchor] = {}
        self._jwks = JwksCache(
            crawler, timer=timer, cache_size=cache_size, host_concurrency=host_concurrency
        )

    @property
    def trusted_jku(self) -> list[str]:
        """The ``SWITCHBOARD_TRUSTED_JKU`` prefixes (setting it parses them again)."""
        return list(self._jku.prefixes)

    @trusted_jku.setter
    def trusted_jku(self, prefixes: list[str]) -> None:
        self._jku = TrustedJku(prefixes)

    # -- anchors ---------------------------------------------------------------------------

    async def load(self) -> None:
        """Create the table if needed and read the anchors into memory."""
        await self.store.create_schema()
        await self.reload()

    async def reload(self) -> bool:
        """Read the anchors again (other replicas may have changed them); True if changed.
        An anchor already in memory with the same stored members is kept as it is (its key
        is not parsed again)."""
        table: Any = TrustAnchorRow.__table__  # type: ignore[attr-defined]
        read = self.store.quick.all_now([select(table)])  # a SQLite file: at once
        if read is not None:
            rows: Any = read[0]
        else:
            async with self.store.session() as session:
                rows = (await session.exec(select(TrustAnchorRow))).all()
        anchors = {row.id: _same(self._anchors.get(row.id), row) or _anchor(row) for row in rows}
        changed = anchors.keys() != self._anchors.keys()
        self._anchors = anchors
        return changed

    def anchors(self) -> list[Anchor]:
        """Every anchor in memory, oldest first."""
        return sorted(self._anchors.values(), key=lambda a: (a.created_at, a.id))

    def get(self, anchor_id: str) -> Anchor:
        """One anchor; :class:`NotFound` if unknown."""
        anchor = self._anchors.get(anchor_id)
        if anchor is None:
            raise NotFound(f"no trusted key has id {anchor_id!r}", details={"id": anchor_id})
        return anchor

    async def add_jwk(
        self, jwk: dict[str, Any], source: Source = "api", *, now: float | None = None
    ) -> Anchor:
        """Trust a public JWK (400 if unusable, private or expired, 409 ``duplicate_key``).

        ``exp``, ``nbf`` and ``iat`` must be NumericDates, and ``exp`` later than ``now``
        (POSIX seconds, default the current time).
        """
        row = _jwk_row(jwk, source)
        refusal = expired(row.jwk or {}, time.time() if now is None else now)
        if refusal is not None:
            raise refusal
        self._check_new(row)
        if not await self._insert(row):
            raise self._duplicate(row)
        return self._remember(row)

    async def add_jwks_url(self, url: str, source: Source = "api") -> Anchor:
        """Trust the keys published at a JWKS URL, after fetching it once to check it.

        Fetch failures raise the crawler's :class:`CrawlError` (422); a document that is not
        a JWKS with at least one usable public key raises 422 ``invalid_jwks``.
        """
        row = _jwks_row(url, source)
        self._check_new(row)
        target = self.crawler.policy.check_url(url)  # CrawlError bad_url if unusable
        entry = await self._jwks.download(target)
        if entry.problem:
            raise RegistryError(
                entry.problem, code="invalid_jwks", status=422, details={"url": url}
            )
        self._jwks.remember(target, entry)
        if not await self._insert(row):
            raise self._duplicate(row)
        return self._remember(row)

    async def remove(self, anchor_id: str) -> None:
        """Stop trusting an anchor; :class:`NotFound` if unknown."""
        async with self.store.session() as session, session.begin():
            row = await session.get(TrustAnchorRow, anchor_id, with_for_update=True)
            if row is None:
                self._anchors.pop(anchor_id, None)
                raise NotFound(f"no trusted key has id {anchor_id!r}", details={"id": anchor_id})
            await session.delete(row)
        self._anchors.pop(anchor_id, None)

    async def apply_seed_keys(self, keys: list[SeedKey]) -> int:
        """Trust the keys of seed files (source "seed"); return how many were new.

        Idempotent: keys already trusted (same thumbprint or URL) are left as they are. JWKS
        URLs are not fetched here (an endpoint down at start must not lose the operator's
        configuration); they are fetched when a card needs them. A JWK that cannot be
        trusted raises ``bad_seed_file`` before anything is stored.
        """
        rows: list[TrustAnchorRow] = []
        for n, seed in enumerate(keys):
            try:
                rows.append(_seed_row(seed))
            except RegistryError as exc:
                what = redact_url(seed.jwks_url) if seed.jwks_url else None
                what = what or (seed.jwk or {}).get("kid") or "no kid"
                raise RegistryError(
                    f"seed key {n} ({what}): {exc.message}", code="bad_seed_file"
                ) from None
        await self.reload()
        known_urls = {a.jwks_url for a in self._anchors.values() if a.jwks_url}
        added = 0
        for row in rows:
            if row.id in self._anchors or (row.jwks_url and row.jwks_url in known_urls):
                continue
            if await self._insert(row):
                added += 1
                self._remember(row)
                if row.jwks_url:
                    known_urls.add(row.jwks_url)
        if added != len(rows):
            await self.reload()  # another replica may have inserted some first
        return added

    def _check_new(self, row: TrustAnchorRow) -> None:
        if row.id in self._anchors or any(
            row.jwks_url and a.jwks_url == row.jwks_url for a in self._anchors.values()
        ):
            raise self._duplicate(row)

    def _duplicate(self, row: TrustAnchorRow) -> Conflict:
        what = f"the JWKS URL {row.jwks_url}" if row.jwks_url else "this key"
        return Conflict(
            f"{what} is already trusted (id {row.id})",
            code="duplicate_key",
            details={"existing_id": row.id},
        )

    async def _insert(self, row: TrustAnchorRow) -> bool:
        """Insert ``row``; False if its id or JWKS URL is already in the table."""
        try:
            async with self.store.session() as session, session.begin():
                session.add(row)
        except IntegrityError:
            return False
        return True

    def _remember(self, row: TrustAnchorRow) -> Anchor:
        anchor = _anchor(row)
        self._anchors[anchor.id] = anchor
        return anchor

    # -- resolving keys ----------------------------------------------------------------------

    def jku_allowed(self, url: str) -> bool:
        """Whether a card's ``jku`` is on ``SWITCHBOARD_TRUSTED_JKU`` (in normal form, under
        a prefix: :meth:`registry.jku.TrustedJku.check`)."""
        return isinstance(self._jku.check(url), URL)

    def host_fetches(self, host: str) -> tuple[int, int]:
        """JWKS fetches for ``host`` (as in the URL): (under way, queued behind the limit)."""
        return self._jwks.host_fetches(host)

    def _jku_hop(self, target: URL) -> str | None:
        """Why a card's jku may not be redirected to ``target`` (checked before it is
        requested), or None: every hop must be on the allow-list again."""
        if isinstance(self._jku.check(str(target)), URL):
            return None
        return "which is not on SWITCHBOARD_TRUSTED_JKU"

    async def keys_for(self, kid: str, jku: str | None) -> KeyLookup:
        """The candidate keys for ``kid``: trusted JWKs; else trusted JWKS URLs and the card's
        ``jku`` if allow-listed; ``problem`` says why there are none.

        A kid found among the trusted JWKs fetches nothing. JWKS are fetched concurrently and
        waited for at most :attr:`lookup_timeout` seconds.
        """
        found: list[tuple[JWK, str]] = []
        seen: set[str] = set()

        def take(key: JWK, label: str) -> None:
            thumbprint = key.thumbprint()
            if thumbprint not in seen:
                seen.add(thumbprint)
                found.append((key, label))

        anchors = self.anchors()
        for anchor in anchors:
            if anchor.key is not None and anchor.matches(kid):
                take(anchor.key, f"trust-store:{anchor.id}")
        if found and any(current(key) for key, _ in found):
            return KeyLookup(keys=found)  # nothing to fetch (an expired one: look further)

        notes: list[str] = []
        sources: list[tuple[str, URL, str]] = []
        for anchor in anchors:
            if anchor.jwks_url:
                try:
                    sources.append((anchor.jwks_url, URL(anchor.jwks_url), "jwks"))
                except (ValueError, TypeError):  # only checked URLs are stored
                    notes.append(f"the trusted JWKS URL {anchor.jwks_url!r} cannot be parsed")
        if jku is not None and jku not in {text for text, _, _ in sources}:
            checked = self._jku.check(jku)
            if isinstance(checked, URL):
                sources.append((jku, checked, "jku"))
            else:
                notes.append(checked)
        results = await self._jwks.lookups(
            [url for _, url, _ in sources],
            kid,
            self.lookup_timeout,
            [self._jku_hop if label == "jku" else None for _, _, label in sources],
        )
        for (text, url, label), result in zip(sources, results, strict=True):
            if result is None:
                notes.append(f"the JWKS at {text} did not answer within {self.lookup_timeout:g} s")
                continue
            keys, entry = result
            where = text
            if entry.final_url != str(url):  # redirected within the origin
                # (a jku's redirects were checked by _jku_hop, unless fetched as a trusted URL)
                if label == "jku" and not isinstance(self._jku.check(entry.final_url), URL):
                    notes.append(
                        f"the card's jku {text} redirected to {entry.final_url}, which is not "
                        "on SWITCHBOARD_TRUSTED_JKU"
                    )
                    continue
                where = f"{text} -> {entry.final_url}"
            for key in keys:
                take(key, f"{label}:{where}")
            if entry.problem:
                notes.append(entry.problem)
            elif not keys and label == "jku":  # a trusted JWKS without this kid is no news
                skipped = f" ({entry.skipped} unusable entries skipped)" if entry.skipped else ""
                notes.append(f"the JWKS at {text} has no key with kid {kid!r}{skipped}")
        if found:
            return KeyLookup(keys=found)
        if jku is None:
            notes.append("the card has no jku")
        return KeyLookup(keys=[], problem="; ".join([f"no trusted key has kid {kid!r}", *notes]))


def _seed_row(seed: SeedKey) -> TrustAnchorRow:
    if seed.jwk is None:
        return _jwks_row(seed.jwks_url or "", "seed")
    return _jwk_row(seed.jwk, "seed")


def _jwk_row(data: object, source: Source) -> TrustAnchorRow:
    key, public = public_jwk(data)
    return TrustAnchorRow(
        id=key.thumbprint(),
        kind="jwk",
        kid=public.get("kid"),
        jwk=public,
        source=source,
        created_at=utcnow(),
    )


def _jwks_row(url: str, source: Source) -> TrustAnchorRow:
    problem = None
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        problem = "jwks_url must be an http(s) URL"
    elif len(url) > MAX_URL:
        problem = f"jwks_url is longer than {MAX_URL} characters"
    elif redact_url(url) != url:
        problem = "jwks_url must not carry credentials (user:password@)"
    if problem:
        shown = redact_url(url) if isinstance(url, str) else None
        raise RegistryError(problem, code="bad_url", status=422, details={"url": shown})
    return TrustAnchorRow(
        id=jwks_anchor_id(url),
        kind="jwks_url",
        jwks_url=url,
        source=source,
        created_at=utcnow(),
    )
