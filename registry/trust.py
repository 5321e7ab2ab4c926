"""The trust store: the public keys Switchboard accepts card signatures from.

Trust anchors are public JWKs and JWKS URLs, added through the admin API (``/api/v1/keys``)
or from seed files, and kept in the ``trust_anchors`` table (each process holds them in
memory; :meth:`TrustStore.reload` picks up other replicas' changes). A card's own ``jku`` is
followed only when it is on ``SWITCHBOARD_TRUSTED_JKU``: it must be a plain http(s) URL in
normal form (what is checked is exactly what is fetched) under one of the prefixes, compared
by scheme, host, port and path segment.

JWKS documents are fetched with the crawler (SSRF guard, redirect, size and time limits), at
most :data:`HOST_CONCURRENCY` at a time per host; a redirect to another origin is refused. They
are cached per URL for their ``Cache-Control: max-age`` clamped to [60 s, 24 h] (300 s without
one); failures are cached for 30 s so a dead endpoint is not hammered. A lookup whose kid is
missing from a JWKS fetched more than 60 s ago fetches it again once (key rotation). A kid
found among the trusted JWKs fetches nothing; otherwise the JWKS are fetched concurrently and
a lookup waits at most ``lookup_timeout`` seconds for them (a fetch still under way goes on and
fills the cache for the next lookup).

No private key material is ever stored: posted JWKs carrying private parameters are refused,
and symmetric (``oct``) keys are never trusted.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from cachetools import TLRUCache
from jwcrypto.jwk import JWK, JWKValuesRegistry, ParmType
from sqlalchemy.exc import IntegrityError
from sqlmodel import select
from yarl import URL

from registry.crawler import Crawler
from registry.errors import Conflict, CrawlError, NotFound, RegistryError
from registry.netguard import redact_url
from registry.records import as_utc, iso, utcnow
from registry.signatures import KeyLookup
from registry.store import Store
from registry.tables import TrustAnchorRow

if TYPE_CHECKING:  # registry.seeds imports registry.service, which imports this module
    from registry.seeds import SeedKey

__all__ = [
    "JWKS_ACCEPT",
    "JWKS_MAX_BYTES",
    "Anchor",
    "TrustAnchorRow",
    "TrustStore",
    "jwks_anchor_id",
    "public_jwk",
]

log = logging.getLogger(__name__)

JWKS_MAX_BYTES = 256 * 1024
JWKS_ACCEPT = "application/jwk-set+json, application/json"
MIN_TTL = 60.0  # also: the least age of a JWKS before a missing kid fetches it again
MAX_TTL = 24 * 3600.0
DEFAULT_TTL = 300.0
FAILURE_TTL = 30.0
CACHE_SIZE = 1024
LOOKUP_TIMEOUT = 10.0  # the longest a key lookup waits for JWKS fetches
HOST_CONCURRENCY = 4  # JWKS fetches under way at once per host
MAX_NUMERIC_DATE = 253402300799  # 9999-12-31T23:59:59Z

# Private members of every key type jwcrypto knows (RSA, EC, OKP, oct, AKP).
PRIVATE_PARAMS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k", "priv"})
_LIFETIME_PARAMS = ("exp", "nbf", "iat")  # kept with the public key (export_public drops them)
_KEY_AGREEMENT_CURVES = frozenset({"X25519", "X448"})
_B64URL = re.compile(r"[A-Za-z0-9_-]+")
_MAX_URL = 2048
# what a jku must not contain: control characters, backslashes, ";" (path parameters, which
# some servers strip: "..;/"), encoded slashes and backslashes (decoded by some servers)
_JKU_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\\;]|%2[fF]|%5[cC]")
_JKU_FORBIDDEN_WHY = "control characters, '\\', ';', '%2F' or '%5C'"

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


# --- JWK validation --------------------------------------------------------------------------


def _refused(message: str, code: str = "invalid_jwk", details: Any = None) -> RegistryError:
    return RegistryError(message, code=code, status=400, details=details)


def public_jwk(data: object) -> tuple[JWK, dict[str, Any]]:
    """Check a JWK meant for verification; return it parsed and its public members.

    Refuses (400) anything that is not a JSON object jwcrypto accepts as an asymmetric public
    signature key: ``symmetric_key`` for ``oct``, ``private_key`` when private members are
    present, ``invalid_jwk`` otherwise (malformed base64url, a point off the curve, a key
    whose ``use``/``key_ops`` forbid verification, a key-agreement curve, ...).
    """
    if not isinstance(data, dict):
        raise _refused("the JWK must be a JSON object")
    kty = data.get("kty")
    if not isinstance(kty, str) or not kty:
        raise _refused('the JWK has no "kty" (key type)')
    if kty == "oct":
        raise _refused(
            "symmetric (oct) keys cannot be trusted: anyone holding the secret could sign; "
            "send an asymmetric public key (EC, RSA or OKP)",
            code="symmetric_key",
        )
    private = sorted(PRIVATE_PARAMS & set(data))
    if private:
        raise _refused(
            f"the JWK carries private key parameters ({', '.join(private)}): "
            "send the public key only (it was not stored)",
            code="private_key",
            details={"private_parameters": private},
        )
    kid = data.get("kid")
    if kid is not None and (not isinstance(kid, str) or not kid):
        raise _refused('the JWK\'s "kid" must be a non-empty string')
    for name, param in JWKValuesRegistry.get(kty, {}).items():
        if not param.public or param.type not in (ParmType.b64, ParmType.b64u):
            continue
        value = data.get(name)
        if value is not None and (not isinstance(value, str) or not _B64URL.fullmatch(value)):
            raise _refused(
                f'the JWK\'s "{name}" is not base64url (unpadded, A-Z a-z 0-9 - _)',
                details={"parameter": name},
            )
    if kty == "OKP" and data.get("crv") in _KEY_AGREEMENT_CURVES:
        raise _refused(f"OKP curve {data['crv']} is for key agreement, not signatures")
    try:
        key = JWK(**data)
        key.get_op_key("verify")  # builds the key: checks the curve point, use and key_ops
    except Exception as exc:  # jwcrypto and cryptography raise many types for bad keys
        reason = str(exc) or type(exc).__name__
        raise _refused(f"the JWK is not a usable public key: {reason}") from None
    if key.has_private:  # pragma: no cover - PRIVATE_PARAMS covers every private member
        raise _refused("the JWK carries a private key: send the public key only", "private_key")
    public = key.export_public(as_dict=True)
    for name in _LIFETIME_PARAMS:
        if name in data:
            public[name] = _numeric_date(name, data[name])
    return JWK(**public), public


def _numeric_date(name: str, value: object) -> int | float:
    """``value`` if it is a NumericDate (RFC 7519: seconds since 1970 as a JSON number)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (isinstance(value, int) or math.isfinite(value))
        or not 0 <= value <= MAX_NUMERIC_DATE
    ):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise _refused(
            f'the JWK\'s "{name}" must be a NumericDate (seconds since 1970-01-01T00:00:00Z '
            f"as a number up to year 9999), not {shown}",
            details={"parameter": name},
        )
    return value


def _current(key: JWK) -> bool:
    """Whether ``key`` has not expired (its ``exp``, if any, is in the future)."""
    exp = key.get("exp")
    return not isinstance(exp, int | float) or exp > time.time()


def _expired(public: dict[str, Any], now: float) -> RegistryError | None:
    """The refusal of a key whose ``exp`` has passed, if it has."""
    exp = public.get("exp")
    if exp is None or exp > now:
        return None
    when = datetime.fromtimestamp(exp, UTC).isoformat(timespec="seconds")
    return _refused(
        f"the JWK expired at {when} (its exp is {exp}): an expired key verifies nothing; "
        "send a current key",
        details={"parameter": "exp", "exp": exp},
    )


# --- JWKS documents --------------------------------------------------------------------------


@dataclass(frozen=True)
class _JwksKey:
    key: JWK
    kid: str | None
    thumbprint: str


@dataclass(frozen=True)
class _Jwks:
    """A fetched JWKS (or why it is unusable), cached per URL for ``ttl`` seconds."""

    url: str
    keys: tuple[_JwksKey, ...]
    problem: str | None
    skipped: int
    ttl: float
    fetched_at: float
    final_url: str  # where the keys came from, after same-origin redirects

    def matching(self, kid: str) -> list[JWK]:
        return [k.key for k in self.keys if k.kid == kid or (k.kid is None and k.thumbprint == kid)]


def _parse_jwks(url: str, data: Any) -> tuple[list[_JwksKey], int, str | None]:
    """The usable keys of a JWKS document, how many entries were skipped, and any problem."""
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        return [], 0, f'the document at {url} is not a JWKS (a JSON object with a "keys" list)'
    keys: list[_JwksKey] = []
    reasons: list[str] = []
    for entry in data["keys"]:
        try:
            key, public = public_jwk(entry)
        except RegistryError as exc:
            reasons.append(exc.message)
            continue
        keys.append(_JwksKey(key, public.get("kid"), key.thumbprint()))
    if not keys:
        if not reasons:
            return [], 0, f"the JWKS at {url} has no keys"
        return (
            [],
            len(reasons),
            f"the JWKS at {url} has no usable key ({len(reasons)} "
            f"entr{'y' if len(reasons) == 1 else 'ies'} skipped; the first: {reasons[0]})",
        )
    return keys, len(reasons), None


def _ttl(max_age: int | None) -> float:
    return DEFAULT_TTL if max_age is None else min(max(float(max_age), MIN_TTL), MAX_TTL)


def _expires(_url: str, entry: _Jwks, now: float) -> float:
    return now + entry.ttl


def _clause(message: str) -> str:
    """A crawler sentence as a clause: no final period, lower-case first letter."""
    message = message.rstrip(".")
    return message[:1].lower() + message[1:]


def _origin(url: URL) -> tuple[str, str | None, int | None]:
    return (url.scheme.lower(), url.raw_host, url.port)


@dataclass(frozen=True)
class _Prefix:
    """One ``SWITCHBOARD_TRUSTED_JKU`` prefix, parsed: an origin and leading path segments.

    ``directory`` (the prefix ends in "/"): a URL must have more segments than ``segments``
    (``/team/`` matches ``/team/`` and ``/team/x``, not ``/team``); otherwise a URL may also
    end where the prefix does (``/team`` matches ``/team`` and ``/team/x``, not ``/teams``).
    """

    origin: tuple[str, str | None, int | None]
    segments: tuple[str, ...]
    directory: bool

    @classmethod
    def parse(cls, text: str) -> _Prefix | None:
        try:
            url = URL(text)
            usable = (
                url.scheme.lower() in ("http", "https")
                and bool(url.raw_host)
                and url.raw_user is None
                and url.raw_password is None
                and not url.raw_query_string
                and not url.raw_fragment
                and "?" not in text
                and "#" not in text
            )
        except (ValueError, TypeError):
            usable = False
        if not usable:
            shown = redact_url(text)
            log.warning("SWITCHBOARD_TRUSTED_JKU: %r is not a plain http(s) URL; ignored", shown)
            return None
        segments = url.raw_path.split("/")
        directory = segments[-1] == ""
        if directory:
            segments = segments[:-1]
        return cls(_origin(url), tuple(segments), directory)

    def covers(self, url: URL) -> bool:
        segments = url.raw_path.split("/")
        n = len(self.segments)
        return (
            _origin(url) == self.origin
            and tuple(segments[:n]) == self.segments
            and (len(segments) > n if self.directory else len(segments) >= n)
        )


def _jku_shape_problem(text: str) -> tuple[URL | None, str | None]:
    """``text`` parsed, if it is a jku that may be checked against the allow-list, else why not.

    What is compared must be what is fetched: a jku is refused when yarl would send anything
    else than its exact text (``str(URL(jku)) != jku``: dot segments, percent-encoding of
    unreserved characters, a default port, upper-case host, whitespace...), and when it holds
    characters that some servers decode or strip (control characters, ``\\``, ``;``, ``%2F``,
    ``%5C``), a query or a fragment (each variant would be its own fetch and cache entry).
    """
    if not isinstance(text, str):
        return None, "it is not a string"
    if len(text) > _MAX_URL:
        return None, f"it is longer than {_MAX_URL} characters"
    forbidden = _JKU_FORBIDDEN.search(text)
    if forbidden:
        found = forbidden.group()
        what = f"U+{ord(found):04X}" if len(found) == 1 and found not in "\\;" else repr(found)
        return None, f"it contains {what} (a jku must not contain {_JKU_FORBIDDEN_WHY})"
    if "?" in text or "#" in text:
        return None, "it has a query or a fragment"
    try:
        url = URL(text)
        normal = str(url)
        host = url.raw_host
    except (ValueError, TypeError):
        return None, "it is not a valid URL"
    if url.scheme.lower() not in ("http", "https") or not host:
        return None, "it is not an absolute http(s) URL"
    if url.raw_user is not None or url.raw_password is not None:
        return None, "it carries credentials"
    if normal != text:
        return None, f"it is not in normal form (it would be fetched as {normal})"
    if any(segment in (".", "..") for segment in url.raw_path.split("/")):
        return None, "it has '.' or '..' path segments"  # pragma: no cover - yarl resolves them
    return url, None


@dataclass
class _Host:
    semaphore: asyncio.Semaphore
    users: int = 0  # holding or queued
    holding: int = 0


class _HostLimiter:
    """At most ``limit`` holders at once per host; a host's entry lives while it is in use."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._hosts: dict[str, _Host] = {}

    @asynccontextmanager
    async def hold(self, host: str) -> AsyncIterator[None]:
        entry = self._hosts.get(host)
        if entry is None:
            entry = self._hosts[host] = _Host(asyncio.Semaphore(self.limit))
        entry.users += 1
        try:
            async with entry.semaphore:
                entry.holding += 1
                try:
                    yield
                finally:
                    entry.holding -= 1
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._hosts[host]

    def holding(self, host: str) -> int:
        """How many hold ``host`` now."""
        entry = self._hosts.get(host)
        return 0 if entry is None else entry.holding

    def waiting(self, host: str) -> int:
        """How many are queued for ``host``."""
        entry = self._hosts.get(host)
        return 0 if entry is None else entry.users - entry.holding


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
        self._timer = timer
        self._anchors: dict[str, Anchor] = {}
        self._cache: TLRUCache[str, _Jwks] = TLRUCache(cache_size, _expires, timer=timer)
        self._inflight: dict[str, asyncio.Future[_Jwks]] = {}
        self._hosts = _HostLimiter(host_concurrency)

    @property
    def trusted_jku(self) -> list[str]:
        """The ``SWITCHBOARD_TRUSTED_JKU`` prefixes (setting it parses them again)."""
        return list(self._trusted_jku)

    @trusted_jku.setter
    def trusted_jku(self, prefixes: list[str]) -> None:
        self._trusted_jku = [prefix for prefix in prefixes if prefix]
        parsed = (_Prefix.parse(prefix) for prefix in self._trusted_jku)
        self._prefixes = [prefix for prefix in parsed if prefix is not None]

    # -- anchors ---------------------------------------------------------------------------

    async def load(self) -> None:
        """Create the table if needed and read the anchors into memory."""
        await self.store.create_schema()
        await self.reload()

    async def reload(self) -> bool:
        """Read the anchors again (other replicas may have changed them); True if changed."""
        async with self.store.session() as session:
            rows = (await session.exec(select(TrustAnchorRow))).all()
        anchors = {row.id: _anchor(row) for row in rows}
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
        expired = _expired(row.jwk or {}, time.time() if now is None else now)
        if expired is not None:
            raise expired
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
        entry = await self._download(target)
        if entry.problem:
            raise RegistryError(
                entry.problem, code="invalid_jwks", status=422, details={"url": url}
            )
        self._cache[str(target)] = entry
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
        """Whether a card's ``jku`` is on ``SWITCHBOARD_TRUSTED_JKU``.

        The jku must be a plain http(s) URL in normal form: yarl sends exactly its text (no dot
        segments, no needless percent-encoding, no default port...), and it has no query or
        fragment, control characters, ``\\``, ``;``, ``%2F`` or ``%5C``. It is then compared
        with each prefix by scheme, host and port, and path segment by segment: a prefix
        ending in "/" matches URLs below it; any other prefix matches itself or URLs below
        it (so ``https://keys.example.com`` does not match ``https://keys.example.com.evil.net/``
        and ``https://a.example/team`` does not match ``https://a.example/teams``).
        """
        return isinstance(self._check_jku(url), URL)

    def host_fetches(self, host: str) -> tuple[int, int]:
        """JWKS fetches for ``host`` (as in the URL): (under way, queued behind the limit)."""
        return self._hosts.holding(host), self._hosts.waiting(host)

    def _check_jku(self, jku: str) -> URL | str:
        """The URL to fetch for an allowed ``jku``, or a note saying why it is not followed."""
        url, problem = _jku_shape_problem(jku)
        if url is None:
            return f"the card's jku {jku!r} is refused: {problem}"
        if not any(prefix.covers(url) for prefix in self._prefixes):
            return f"the card's jku {jku} is not on SWITCHBOARD_TRUSTED_JKU"
        return url

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
        if found and any(_current(key) for key, _ in found):
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
            checked = self._check_jku(jku)
            if isinstance(checked, URL):
                sources.append((jku, checked, "jku"))
            else:
                notes.append(checked)
        results = await self._lookups([url for _, url, _ in sources], kid)
        for (text, url, label), result in zip(sources, results, strict=True):
            if result is None:
                notes.append(f"the JWKS at {text} did not answer within {self.lookup_timeout:g} s")
                continue
            keys, entry = result
            where = text
            if entry.final_url != str(url):  # redirected within the origin
                if label == "jku" and not isinstance(self._check_jku(entry.final_url), URL):
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

    async def _lookups(self, urls: list[URL], kid: str) -> list[tuple[list[JWK], _Jwks] | None]:
        """:meth:`_lookup` for each URL at once; None for those not done in time.

        A fetch that is not done in time goes on (it is shielded) and fills the cache.
        """
        if not urls:
            return []
        tasks = [asyncio.ensure_future(self._lookup(url, kid)) for url in urls]
        try:
            done, _ = await asyncio.wait(tasks, timeout=self.lookup_timeout)
        finally:
            for task in tasks:
                task.cancel()  # only the waiting: the fetches themselves are shielded
        return [task.result() if task in done else None for task in tasks]

    async def _lookup(self, url: URL, kid: str) -> tuple[list[JWK], _Jwks]:
        """The keys with ``kid`` of the JWKS at ``url``, and the (cached) JWKS."""
        entry = await self._jwks(url)
        keys = entry.matching(kid)
        if not keys and entry.problem is None:
            # a new kid may mean a rotated key: fetch again once the copy is MIN_TTL old
            entry = await self._jwks(url, stale_before=self._timer() - MIN_TTL)
            keys = entry.matching(kid)
        return keys, entry

    async def _jwks(self, url: URL, *, stale_before: float | None = None) -> _Jwks:
        """The JWKS at ``url`` from the cache, or fetched (one fetch per URL at a time)."""
        key = str(url)
        entry = self._cache.get(key)
        if entry is not None and (stale_before is None or entry.fetched_at > stale_before):
            return entry
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._refresh(url))
            self._inflight[key] = task
            task.add_done_callback(partial(self._done, key))
        return await asyncio.shield(task)

    def _done(self, key: str, task: asyncio.Future[_Jwks]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]

    async def _refresh(self, url: URL) -> _Jwks:
        try:
            entry = await self._download(url)
        except CrawlError as exc:
            log.info("JWKS %s could not be fetched: %s", url, exc.message)
            entry = self._failure(
                url, f"the JWKS at {url} could not be fetched: {_clause(exc.message)}"
            )
        self._cache[str(url)] = entry
        return entry

    def _failure(self, url: URL, problem: str) -> _Jwks:
        return _Jwks(
            url=str(url),
            keys=(),
            problem=problem,
            skipped=0,
            ttl=FAILURE_TTL,
            fetched_at=self._timer(),
            final_url=str(url),
        )

    async def _download(self, url: URL) -> _Jwks:
        """Fetch and parse a JWKS; :class:`CrawlError` if it cannot be fetched.

        Fetches exactly ``url`` (the crawler takes the URL object as it is), at most
        :data:`HOST_CONCURRENCY` at a time per host; a redirect to another origin makes the
        document unusable.
        """
        async with self._hosts.hold(url.raw_host or ""):
            fetched = await self.crawler.fetch_json(
                url,  # type: ignore[arg-type]  # the crawler's check_url takes a URL as is
                max_bytes=JWKS_MAX_BYTES,
                accept=JWKS_ACCEPT,
            )
        shown = str(url)
        final = URL(fetched.url)
        if _origin(final) != _origin(url):
            log.info("JWKS %s redirected to another origin: %s", shown, fetched.url)
            return self._failure(
                url,
                f"the JWKS at {shown} redirected to {fetched.url}, another origin "
                "(a JWKS must be served from its own origin)",
            )
        keys, skipped, problem = _parse_jwks(shown, fetched.data)
        return _Jwks(
            url=shown,
            keys=tuple(keys),
            problem=problem,
            skipped=skipped,
            ttl=FAILURE_TTL if problem else _ttl(fetched.max_age),
            fetched_at=self._timer(),
            final_url=fetched.url,
        )


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
    elif len(url) > _MAX_URL:
        problem = f"jwks_url is longer than {_MAX_URL} characters"
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
