"""Revoke the API keys made for a built-in principal's name (admin-token, read-token).

Earlier versions let an admin make an API key whose subject was ``admin-token`` or
``read-token``, and a task's owner was its tenant and subject alone, so such a key read
every task made with the built-in token of that name. This version refuses to make such
keys and refuses them at sign-in; this revision revokes those still active (``revoked_by``
``schema revision 0002``), each with an entry in the audit log (action ``DELETE
/api/v1/clients/{client_id}``, actor ``schema-revision:0002``) and a warning in the log. A
data change only: the schema is 0001's, and the code of 0001 runs on it.

Downgrade: changes nothing; the keys stay revoked (make keys for other subjects).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

log = logging.getLogger("switchboard.migrations")

BUILT_IN = ("admin-token", "read-token")  # registry.access.principal.BUILT_IN, as of now
ACTOR = "schema-revision:0002"
ACTION = "DELETE /api/v1/clients/{client_id}"

_KEYS = sa.table(
    "api_keys",
    sa.column("id", sa.String),
    sa.column("prefix", sa.String),
    sa.column("subject", sa.String),
    sa.column("tenant", sa.String),
    sa.column("revoked_at", sa.DateTime(timezone=True)),
    sa.column("revoked_by", sa.String),
)
_AUDIT = sa.table(
    "audit_log",
    sa.column("at", sa.DateTime(timezone=True)),
    sa.column("actor", sa.String),
    sa.column("subject", sa.String),
    sa.column("tenant", sa.String),
    sa.column("method", sa.String),
    sa.column("path", sa.String),
    sa.column("action", sa.String),
    sa.column("target", sa.String),
    sa.column("status", sa.Integer),
    sa.column("details", sa.JSON),
)


def upgrade() -> None:
    conn = op.get_bind()
    now = datetime.now(UTC)
    rows = conn.execute(
        sa.select(_KEYS.c.id, _KEYS.c.prefix, _KEYS.c.subject, _KEYS.c.revoked_at)
        .where(_KEYS.c.subject.in_(BUILT_IN))
        .order_by(_KEYS.c.id)
    ).all()
    for row in rows:
        if row.revoked_at is not None and _utc(row.revoked_at) <= now:
            continue  # already refused
        conn.execute(
            sa.update(_KEYS)
            .where(_KEYS.c.id == row.id)
            .values(revoked_at=now, revoked_by="schema revision 0002")
        )
        conn.execute(sa.insert(_AUDIT).values(**_entry(row, now)))
        log.warning(
            "revoked the API key %s: its subject %r is a built-in principal's name, which let "
            "it read that token's tasks; make the client a key for another subject",
            row.prefix,
            row.subject,
        )


def downgrade() -> None:
    """Nothing to undo: the keys stay revoked."""


def _entry(row: Any, now: datetime) -> dict[str, Any]:
    return {
        "at": now,
        "actor": ACTOR,
        "subject": None,
        "tenant": None,
        "method": "DELETE",
        "path": f"/api/v1/clients/{row.id}",
        "action": ACTION,
        "target": row.id,
        "status": 204,
        "details": {
            "revoked": "its subject names a built-in principal",
            "subject": row.subject,
            "by": "schema revision 0002 (switchboard db upgrade, or serve at start)",
        },
    }


def _utc(value: datetime) -> datetime:
    """Aware UTC (SQLite gives back naive datetimes, which are UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
