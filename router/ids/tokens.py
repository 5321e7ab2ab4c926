"""Self-describing router IDs: sealed (agent, upstream ID) pairs, so mapping needs no lookup.

A router task ID is ``t1.`` + base64url (no padding) of the AES-SIV encryption of the task's
agent, its upstream task ID and its router context (as the agent's upstream context when
the router context is that context's own token, else the router context itself). A router
context made for a new conversation is ``c1.`` + the sealed (agent, upstream context ID).
AES-SIV is deterministic and authenticated: every replica makes the same ID for the same
upstream ID with no coordination, and a client cannot forge or alter one (it fails to
open). A token is sealed for one owner scope (:mod:`router.ids.owners`): a scope other than
the anonymous ``""`` is AES-SIV associated data beside the prefix, so a token opens only in
the scope it was made for (in any other it is as unknown as a forged one), and the anonymous
scope's tokens are those of earlier versions. The 64-byte key is generated once and kept in
the database (``router_secrets``, the oldest row wins), so every replica and every restart
share it.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from registry.records import utcnow
from registry.store import Store
from router.tables import IdSecretRow

__all__ = [
    "CONTEXT_PREFIX",
    "TASK_PREFIX",
    "IdSecretRow",
    "Sealer",
    "load_id_secret",
]

TASK_PREFIX = "t1."
CONTEXT_PREFIX = "c1."
_SECRET_BYTES = 64  # AES-256-SIV
_TOKEN_MAX = 4096  # longer strings are not even tried

# how a task token names its router context
CTX_NONE = 0  # the task has none
CTX_UPSTREAM = 1  # the token of (agent, this upstream context)
CTX_ROUTER = 2  # this router context, as it is


_SECRET_ROW = 1  # the one row of the key


class Sealer:
    """Seals and opens router task and context IDs with one key, in one owner scope (``""``:
    the anonymous scope; see :meth:`scoped`)."""

    def __init__(self, key: bytes, scope: str = "") -> None:
        if len(key) != _SECRET_BYTES:
            raise ValueError(f"the ID key must be {_SECRET_BYTES} bytes")
        self._siv = AESSIV(key)
        self.scope = scope
        self._data = _associated(scope)

    def scoped(self, scope: str) -> Sealer:
        """The same key in another scope (cheap: the cipher is shared)."""
        if scope == self.scope:
            return self
        view = object.__new__(Sealer)
        view._siv, view.scope, view._data = self._siv, scope, _associated(scope)
        return view

    def seal_task(self, agent_id: str, upstream: str, kind: int, context: str | None) -> str:
        """The task ID of an agent's task; ``kind`` says what ``context`` is (CTX_*)."""
        return self._seal(TASK_PREFIX, [agent_id, upstream, kind, context])

    def open_task(self, token: str) -> tuple[str, str, int, str | None] | None:
        """(agent, upstream task ID, kind, context) of a task ID made here, else None."""
        data = self._open(TASK_PREFIX, token)
        if (
            not isinstance(data, list)
            or len(data) != 4
            or not all(isinstance(item, str) for item in data[:2])
            or data[2] not in (CTX_NONE, CTX_UPSTREAM, CTX_ROUTER)
            or (data[3] is None) != (data[2] == CTX_NONE)
            or (data[3] is not None and not isinstance(data[3], str))
        ):
            return None
        return data[0], data[1], data[2], data[3]

    def seal_context(self, agent_id: str, upstream: str) -> str:
        """The router context of an agent's own context."""
        return self._seal(CONTEXT_PREFIX, [agent_id, upstream])

    def open_context(self, token: str) -> tuple[str, str] | None:
        """(agent, upstream context ID) of a context ID made here, else None."""
        data = self._open(CONTEXT_PREFIX, token)
        if not isinstance(data, list) or len(data) != 2:
            return None
        if not all(isinstance(item, str) for item in data):
            return None
        return data[0], data[1]

    def _seal(self, prefix: str, data: list[Any]) -> str:
        plain = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
        sealed = self._siv.encrypt(plain, self._data[prefix])
        return prefix + base64.urlsafe_b64encode(sealed).rstrip(b"=").decode("ascii")

    def _open(self, prefix: str, token: Any) -> Any:
        if not isinstance(token, str) or not token.startswith(prefix) or len(token) > _TOKEN_MAX:
            return None
        body = token[len(prefix) :]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != body:
                return None  # one ID, one spelling
            plain = self._siv.decrypt(raw, self._data[prefix])
            return json.loads(plain)
        except (binascii.Error, ValueError, InvalidTag, UnicodeDecodeError, RecursionError):
            return None


def _associated(scope: str) -> dict[str, list[bytes]]:
    """The associated data per prefix: the prefix, and the scope unless anonymous (so the
    anonymous scope's tokens are those of earlier versions)."""
    extra = [scope.encode("utf-8", "surrogatepass")] if scope else []
    return {prefix: [prefix.encode(), *extra] for prefix in (TASK_PREFIX, CONTEXT_PREFIX)}


async def load_id_secret(store: Store) -> bytes:
    """The database's ID key, generated on first use. Race-safe: the key is row 1, so of two
    processes starting together one inserts it and the other reads that one."""
    secret = await _oldest(store)
    if secret is not None:
        return secret
    fresh = base64.urlsafe_b64encode(os.urandom(_SECRET_BYTES)).decode("ascii")
    try:
        async with store.session() as session, session.begin():
            session.add(IdSecretRow(id=_SECRET_ROW, secret=fresh, created_at=utcnow()))
    except IntegrityError:
        pass  # another process inserted it first: use theirs
    secret = await _oldest(store)
    assert secret is not None
    return secret


async def _oldest(store: Store) -> bytes | None:
    async with store.session() as session:
        query = select(IdSecretRow).order_by(col(IdSecretRow.id))
        row = (await session.exec(query)).first()
    return base64.urlsafe_b64decode(row.secret) if row is not None else None
