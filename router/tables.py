"""The router's database tables, all in one place; :data:`TABLES` is what the router
adds to the registry's schema (see :mod:`router.app`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, UniqueConstraint
from sqlmodel import Field, SQLModel

from registry.tables import TABLES as REGISTRY_TABLES
from router.protocol.payloads import MAX_ID_LENGTH


class SigningKeyRow(SQLModel, table=True):
    """The generated router signing key (private JWK), shared by every replica."""

    __tablename__ = "router_signing_keys"

    kid: str = Field(primary_key=True, max_length=128)
    # the one generated key has slot 1 (unique): of two replicas starting together, one
    # inserts it and the other reads that one
    slot: int | None = Field(default=None, unique=True)
    jwk: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(sa_type=DateTime(timezone=True))


class IdSecretRow(SQLModel, table=True):
    """The key that seals router IDs (base64url), shared by every replica."""

    __tablename__ = "router_secrets"

    id: int | None = Field(default=None, primary_key=True)
    secret: str = Field(max_length=128)
    created_at: datetime = Field(sa_type=DateTime(timezone=True))


class RouterContextRow(SQLModel, table=True):
    """One agent's upstream context within a router context (agent ``""``: the context
    itself, recorded before any agent served it)."""

    __tablename__ = "router_contexts"
    __table_args__ = (UniqueConstraint("agent_id", "upstream_context_id"),)

    context_id: str = Field(primary_key=True, max_length=MAX_ID_LENGTH)
    agent_id: str = Field(primary_key=True, max_length=64)
    upstream_context_id: str | None = Field(default=None, max_length=MAX_ID_LENGTH)
    created_at: datetime = Field(sa_type=DateTime(timezone=True))


class TaskAliasRow(SQLModel, table=True):
    """A task ID chosen by an A2A v0.1 client (``tasks/send`` ``id``) and the router task it
    stands for (see :mod:`router.compat.aliases`)."""

    __tablename__ = "router_task_aliases"

    alias: str = Field(primary_key=True, max_length=MAX_ID_LENGTH)
    task_id: str = Field(index=True, max_length=64)
    created_at: datetime = Field(sa_type=DateTime(timezone=True))


class TaskAliasEntry(SQLModel, table=True):
    """A v0.1 client's task ID bound to a router task ID of any length (a token); the
    earlier versions' bindings stay in :class:`TaskAliasRow`."""

    __tablename__ = "router_task_alias_entries"

    alias: str = Field(primary_key=True, max_length=MAX_ID_LENGTH)
    task_id: str = Field(max_length=MAX_ID_LENGTH)
    created_at: datetime = Field(sa_type=DateTime(timezone=True))


class RouterTaskEntry(SQLModel, table=True):
    """A router task as ListTasks lists it: its IDs, context and last known state; the
    mapping of a stored (non-token) task ID too (earlier versions' IDs, overlong upstream
    IDs)."""

    __tablename__ = "router_task_entries"
    __table_args__ = (UniqueConstraint("agent_id", "upstream_task_id"),)

    task_id: str = Field(primary_key=True, max_length=MAX_ID_LENGTH)
    agent_id: str = Field(max_length=64)
    upstream_task_id: str = Field(max_length=MAX_ID_LENGTH)
    context_id: str | None = Field(default=None, index=True, max_length=MAX_ID_LENGTH)
    state: str | None = Field(default=None, max_length=64)
    created_at: datetime = Field(sa_type=DateTime(timezone=True), index=True)
    updated_at: datetime = Field(sa_type=DateTime(timezone=True), index=True)


TABLES: tuple[type[SQLModel], ...] = (
    SigningKeyRow,
    IdSecretRow,
    RouterContextRow,
    TaskAliasRow,
    TaskAliasEntry,
    RouterTaskEntry,
)

SCHEMA: tuple[type[SQLModel], ...] = REGISTRY_TABLES + TABLES
"""Every table of a Switchboard database: the registry's and the router's."""
