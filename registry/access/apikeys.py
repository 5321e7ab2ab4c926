"""API keys for clients: created, listed, revoked and rotated by operators; checked per request.

A key is ``sbk_<id>_<secret>``: ``id`` is 12 lowercase hex digits (public: lists, logs and the
audit log name keys by it), ``secret`` 32 random bytes in unpadded base64url. It is shown once,
when it is made; the ``api_keys`` table keeps the SHA-256 of the whole key (keys are random
and long, so a plain hash is the right one: no salt or slow hash adds anything), the
principal it stands for (subject, tenant, groups, admin roles) and its lifetime. The key
itself is never stored nor logged.

:meth:`ApiKeys.authenticate` reads the key's row on every call (one primary-key read, at
once on a SQLite file: :mod:`registry.quickread`) and caches no key: a key revoked through
any replica is refused at once by all of them. It remembers only, for :data:`UNKNOWN_TTL`
seconds, the key ids that have no row (at most :data:`UNKNOWN_MAX`), so that a flood of
unknown keys costs no read after the first; a key created by this process is forgotten there
at once. A key id is random (48 bits) and named only once its key exists, so no other process
can have remembered an id as unknown before it was made.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from cachetools import TTLCache
from sqlalchemy import and_, bindparam, or_
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select, update

from registry.access.errors import AuthError
from registry.access.principal import BUILT_IN, ROLES, Principal
from registry.errors import Conflict, NotFound, RegistryError, number
from registry.paging import Page, decode_cursor, encode_cursor
from registry.records import as_utc, iso, utcnow
from registry.store import Store
from registry.tables import ApiKeyRow

__all__ = [
    "KEY_PREFIX",
    "MAX_GRACE",
    "ApiKeyInfo",
    "ApiKeys",
    "KeyStatus",
]

KEY_PREFIX = "sbk_"
MAX_GRACE = 30 * 86400.0
"""The longest a rotated key may keep working beside its successor, in seconds."""
MAX_TEXT = 256  # characters of a subject, tenant or group
MAX_DESCRIPTION = 1024
MAX_GROUPS = 64
UNKNOWN_TTL = 10.0
"""Seconds a key id without a row is remembered as unknown (no read for it meanwhile)."""
UNKNOWN_MAX = 10_000
"""Unknown key ids remembered at most (the oldest forgotten first)."""

KeyStatus = Literal["active", "revoked", "expired"]

_ID_LENGTH = 12
_SECRET_LENGTH = 43  # 32 bytes in unpadded base64url
_KEY = re.compile(r"sbk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ID_ATTEMPTS = 5


@dataclass(frozen=True)
class ApiKeyInfo:
    """An API key as lists and answers show it: everything but the key and its hash."""

    id: str
    prefix: str
    subject: str
    tenant: str | None
    groups: tuple[str, ...]
    roles: tuple[str, ...]
    description: str | None
    created_at: datetime
    created_by: str
    expires_at: datetime | None
    revoked_at: datetime | None
    revoked_by: str | None
    rotated_to: str | None

    def status(self, now: datetime) -> KeyStatus:
        """``revoked`` from ``revoked_at`` on, else ``expired`` from ``expires_at`` on, else
        ``active`` (also while a rotated key's grace period runs)."""
        if self.revoked_at is not None and self.revoked_at <= now:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"

    def principal(self) -> Principal:
        """The principal a request with this key is made by."""
        return Principal(
            subject=self.subject,
            tenant=self.tenant,
            groups=frozenset(self.groups),
            roles=frozenset(self.roles),
            method="api-key",
            key_id=self.id,
        )

    def to_api(self, now: datetime) -> dict[str, Any]:
        """The admin API's view (never the key, never its hash)."""
        return {
            "id": self.id,
            "prefix": self.prefix,
            "status": self.status(now),
            "subject": self.subject,
            "tenant": self.tenant,
            "groups": list(self.groups),
            "roles": list(self.roles),
            "description": self.description,
            "created_at": iso(self.created_at),
            "created_by": self.created_by,
            "expires_at": _iso(self.expires_at),
            "revoked_at": _iso(self.revoked_at),
            "revoked_by": self.revoked_by,
            "rotated_to": self.rotated_to,
        }


def _iso(value: datetime | None) -> str | None:
    return None if value is None else iso(value)


_TABLE: Any = ApiKeyRow.__table__
_BY_ID = select(_TABLE).where(_TABLE.c.id == bindparam("id"))


def _info(row: Any) -> ApiKeyInfo:
    """The info of a key's row (an ORM row or a core result row)."""
    return ApiKeyInfo(
        id=row.id,
        prefix=row.prefix,
        subject=row.subject,
        tenant=row.tenant,
        groups=tuple(row.groups or ()),
        roles=tuple(row.roles or ()),
        description=row.description,
        created_at=as_utc(row.created_at),
        created_by=row.created_by,
        expires_at=None if row.expires_at is None else as_utc(row.expires_at),
        revoked_at=None if row.revoked_at is None else as_utc(row.revoked_at),
        revoked_by=row.revoked_by,
        rotated_to=row.rotated_to,
    )


def digest(key: str) -> str:
    """The SHA-256 of a whole key, in hex: what the table keeps."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def _new_key() -> tuple[str, str]:
    """A new key id and the whole key."""
    key_id = secrets.token_hex(_ID_LENGTH // 2)
    secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
    return key_id, f"{KEY_PREFIX}{key_id}_{secret}"


def _bad(field: str, problem: str) -> RegistryError:
    return RegistryError(
        f"{field}: {problem}",
        code="invalid_client",
        details=[{"field": field, "problem": problem}],
    )


def _text(field: str, value: object, maximum: int = MAX_TEXT) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _bad(field, "must be a non-empty string")
    if len(value) > maximum or _CONTROL.search(value):
        raise _bad(field, f"must be at most {maximum} characters, without control characters")
    return value


class ApiKeys:
    """The ``api_keys`` table: create, list, show, revoke and rotate keys; authenticate one.

    ``clock`` gives the current time (aware UTC; tests move it); every replica reads the same
    table, no key is cached (only ids without a key, for ``unknown_ttl`` seconds of
    ``timer``'s: see the module docstring).
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], datetime] = utcnow,
        unknown_ttl: float = UNKNOWN_TTL,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.clock = clock
        self._reading: dict[str, asyncio.Future[Any]] = {}  # key id -> the read in flight
        self._unknown: TTLCache[str, bool] = TTLCache(UNKNOWN_MAX, unknown_ttl, timer=timer)

    # --- operators ----------------------------------------------------------------------------

    async def create(
        self,
        subject: str,
        *,
        tenant: str | None = None,
        groups: Iterable[str] = (),
        roles: Iterable[str] = (),
        description: str | None = None,
        expires_at: datetime | None = None,
        by: str,
    ) -> tuple[ApiKeyInfo, str]:
        """A new key for ``subject`` (in ``tenant``, with ``groups`` and admin ``roles``),
        made by ``by`` (an actor label); the key's info and the key itself, which is shown
        this once. 400 ``invalid_client`` for a bad value, 422 ``reserved_subject`` for a
        built-in principal's name (``admin-token``, ``read-token``)."""
        now = self.clock()
        values = {
            "subject": _subject(subject),
            "tenant": None if tenant is None else _text("tenant", tenant),
            "groups": _groups(groups),
            "roles": _roles(roles),
            "description": _description(description),
            "expires_at": _expiry(expires_at, now),
        }
        return await self._insert(values, now, by)

    async def list(
        self,
        *,
        limit: int = 100,
        cursor: str | None = None,
        subject: str | None = None,
        tenant: str | None = None,
    ) -> Page[ApiKeyInfo]:
        """A page of keys, newest first (revoked and expired ones too), optionally of one
        ``subject`` or ``tenant``; ``cursor`` is the previous page's ``next_cursor``."""
        scope = "api_keys:" + json.dumps([subject, tenant])
        query = select(ApiKeyRow)
        if subject is not None:
            query = query.where(col(ApiKeyRow.subject) == subject)
        if tenant is not None:
            query = query.where(col(ApiKeyRow.tenant) == tenant)
        if cursor:
            at, key_id = decode_cursor(cursor, scope, (str, str))
            try:
                after = datetime.fromisoformat(at)
            except ValueError:
                after = None
            if after is None or after.tzinfo is None:
                raise RegistryError(
                    "the cursor is not valid; pass next_cursor unchanged",
                    code="invalid_cursor",
                    details={"cursor": cursor},
                )
            query = query.where(
                or_(
                    col(ApiKeyRow.created_at) < after,
                    and_(col(ApiKeyRow.created_at) == after, col(ApiKeyRow.id) < key_id),
                )
            )
        query = query.order_by(col(ApiKeyRow.created_at).desc(), col(ApiKeyRow.id).desc())
        async with self.store.session() as session:
            rows = (await session.exec(query.limit(limit + 1))).all()
        items = [_info(row) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit and items:
            last = items[-1]
            next_cursor = encode_cursor(scope, [last.created_at.isoformat(), last.id])
        return Page(items, next_cursor)

    async def get(self, key_id: str) -> ApiKeyInfo:
        """One key's info; 404 ``not_found`` if there is none with this id."""
        async with self.store.session() as session:
            row = await session.get(ApiKeyRow, key_id) if _is_id(key_id) else None
        if row is None:
            raise _not_found(key_id)
        return _info(row)

    async def revoke(self, key_id: str, by: str) -> ApiKeyInfo:
        """Refuse the key from now on (every replica, at once); revoking a revoked key changes
        nothing, and ends a rotated key's grace period now."""
        now = self.clock()
        async with self.store.session() as session, session.begin():
            row = await session.get(ApiKeyRow, key_id) if _is_id(key_id) else None
            if row is None:
                raise _not_found(key_id)
            if row.revoked_at is None or as_utc(row.revoked_at) > now:
                row.revoked_at, row.revoked_by = now, by
                session.add(row)
        return _info(row)

    async def rotate(self, key_id: str, by: str, grace: float = 0) -> tuple[ApiKeyInfo, str]:
        """A new key for the same principal (same subject, tenant, groups, roles, description
        and expiry); the old one is refused at once, or after ``grace`` seconds. The new key's
        info and the key, shown this once. 409 if the old key is revoked, expired or already
        rotated (rotate its successor)."""
        if (
            isinstance(grace, bool)
            or not isinstance(grace, int | float)
            or not 0 <= grace <= MAX_GRACE
        ):
            raise _bad(
                "grace_seconds", f"must be a number of seconds from 0 to {number(MAX_GRACE)}"
            )
        now = self.clock()
        old = await self.get(key_id)
        if old.rotated_to is not None:
            raise Conflict(
                f"key {key_id} was already rotated to {old.rotated_to}: rotate that one",
                code="key_rotated",
                details={"id": key_id, "rotated_to": old.rotated_to},
            )
        status = old.status(now)
        if status != "active":
            raise Conflict(
                f"key {key_id} is {status}: create a new key instead",
                code=f"key_{status}",
                details={"id": key_id},
            )
        values = {
            "subject": old.subject,
            "tenant": old.tenant,
            "groups": list(old.groups),
            "roles": list(old.roles),
            "description": old.description,
            "expires_at": old.expires_at,
        }
        ends = now + timedelta(seconds=float(grace))

        async def retire(session: Any, new_id: str) -> None:
            # only if nobody rotated or revoked it meanwhile (another request, another replica)
            result = await session.exec(
                update(ApiKeyRow)
                .where(
                    col(ApiKeyRow.id) == key_id,
                    col(ApiKeyRow.rotated_to).is_(None),
                    col(ApiKeyRow.revoked_at).is_(None),
                )
                .values(rotated_to=new_id, revoked_at=ends, revoked_by=by)
            )
            if not result.rowcount:
                raise Conflict(
                    f"key {key_id} was revoked or rotated meanwhile",
                    code="key_rotated",
                    details={"id": key_id},
                )

        return await self._insert(values, now, by, retire)

    # --- requests -----------------------------------------------------------------------------

    async def authenticate(self, key: str) -> Principal:
        """The principal of ``key``; :class:`AuthError` ``malformed``, ``unknown_key`` (no such
        key: a wrong secret says the same), ``revoked`` or ``expired``. Reads the table every
        time (one primary-key read), but for an id found unknown a moment ago."""
        match = _KEY.fullmatch(key) if isinstance(key, str) else None
        if match is None:
            raise AuthError(
                "malformed",
                "the API key is malformed: send the whole key as it was given (sbk_<id>_<secret>)",
            )
        key_id = match.group(1)
        row = None if key_id in self._unknown else await self._row(key_id)
        if row is None:
            self._unknown[key_id] = True  # no read for it for a while (module docstring)
        if row is None or not hmac.compare_digest(digest(key), row.key_sha256):
            raise AuthError("unknown_key", "the API key is not valid")
        info = _info(row)
        status = info.status(self.clock())
        if status == "revoked":
            raise AuthError("revoked", f"the API key {info.prefix} was revoked")
        if status == "expired":
            raise AuthError("expired", f"the API key {info.prefix} has expired")
        if info.subject in BUILT_IN:  # made by an older replica during an upgrade
            raise AuthError(
                "revoked",
                f"the API key {info.prefix} names a built-in principal ({info.subject}): "
                "it is refused; make a key for another subject",
            )
        return info.principal()

    # --- internals ----------------------------------------------------------------------------

    async def _row(self, key_id: str) -> Any:
        """The row of ``key_id``, read for this request (no cache): on a SQLite file at once
        (:mod:`registry.quickread`); elsewhere requests of one key that arrive while a read
        is in flight share it, and a finished read is never reused."""
        if self.store.quick.immediate:
            return await self._read(key_id)
        read = self._reading.get(key_id)
        if read is None or read.done():
            read = asyncio.ensure_future(self._read(key_id))
            self._reading[key_id] = read

            def forget(done: asyncio.Future[Any]) -> None:
                if self._reading.get(key_id) is done:
                    del self._reading[key_id]

            read.add_done_callback(forget)
        return await asyncio.shield(read)

    async def _read(self, key_id: str) -> Any:
        return await self.store.quick.first(_BY_ID, {"id": key_id})

    async def _insert(
        self,
        values: dict[str, Any],
        now: datetime,
        by: str,
        then: Callable[[Any, str], Any] | None = None,
    ) -> tuple[ApiKeyInfo, str]:
        """Insert a key row with a fresh id (a new one should an id be taken), running
        ``then(session, id)`` in the same transaction."""
        for attempt in range(_ID_ATTEMPTS):
            key_id, key = _new_key()
            row = ApiKeyRow(
                id=key_id,
                prefix=f"{KEY_PREFIX}{key_id}",
                key_sha256=digest(key),
                created_at=now,
                created_by=by,
                **values,
            )
            try:
                async with self.store.session() as session, session.begin():
                    session.add(row)
                    await session.flush()
                    if then is not None:
                        await then(session, key_id)
            except IntegrityError:
                if attempt == _ID_ATTEMPTS - 1:
                    raise
                continue
            self._unknown.pop(key_id, None)  # known from now on, here at once
            return _info(row), key
        raise AssertionError("unreachable")  # pragma: no cover


def _is_id(key_id: str) -> bool:
    return len(key_id) == _ID_LENGTH and all(c in "0123456789abcdef" for c in key_id)


def _not_found(key_id: str) -> NotFound:
    return NotFound(f"no client key with id {key_id!r}", details={"id": key_id})


def _subject(subject: object) -> str:
    """A key's subject: any name but a built-in principal's (422 ``reserved_subject``)."""
    name = _text("subject", subject)
    if name in BUILT_IN:
        problem = (
            f"{name!r} is the name of a built-in principal (the "
            f"{name.replace('-', ' ')} of SWITCHBOARD_{name.upper().replace('-', '_')}): "
            "choose another subject"
        )
        raise RegistryError(
            f"subject: {problem}",
            code="reserved_subject",
            status=422,
            details=[{"field": "subject", "problem": problem}],
        )
    return name


def _groups(groups: Iterable[str]) -> list[str]:
    if isinstance(groups, str):
        raise _bad("groups", "must be a list of group names, not one string")
    result: list[str] = []
    for group in groups:
        name = _text("groups", group)
        if name not in result:
            result.append(name)
    if len(result) > MAX_GROUPS:
        raise _bad("groups", f"at most {MAX_GROUPS} groups")
    return result


def _roles(roles: Iterable[str]) -> list[str]:
    if isinstance(roles, str):
        raise _bad("roles", "must be a list of roles, not one string")
    result: list[str] = []
    for role in roles:
        if role not in ROLES:
            raise _bad("roles", f"{role!r} is not a role: use {', '.join(sorted(ROLES))}")
        if role not in result:
            result.append(role)
    return sorted(result)


def _description(description: str | None) -> str | None:
    if description is None:
        return None
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        raise _bad("description", f"must be a string of at most {MAX_DESCRIPTION} characters")
    return description or None


def _expiry(expires_at: datetime | None, now: datetime) -> datetime | None:
    if expires_at is None:
        return None
    if not isinstance(expires_at, datetime) or expires_at.tzinfo is None:
        raise _bad("expires_at", "must be a time with a timezone, e.g. 2030-01-31T00:00:00Z")
    if expires_at <= now:
        raise _bad("expires_at", f"must be in the future (now is {iso(now)})")
    return as_utc(expires_at)
