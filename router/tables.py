"""The router's database tables, all in one place; :data:`TABLES` is what the router
adds to the registry's schema (see :mod:`router.app`).

Tasks, contexts and v0.1 task aliases belong to an owner scope (:mod:`router.ids.owners`).
The tables of earlier versions (``router_tasks``, ``router_contexts``,
``router_task_aliases``, ``router_task_alias_entries``) are no longer declared: their rows are
moved into these by the baseline schema revision (:mod:`registry.migrations.legacy`). A change
here needs a revision (``registry/migrations/README.md``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from registry.tables import TABLES as REGISTRY_TABLES
from router.protocol.payloads import MAX_ID_LENGTH

OWNER_MAX_LENGTH = 128
"""The longest stored owner (UTF-8 bytes): longer scopes are stored as their digest
(:func:`router.ids.owners.owner_key`)."""


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


class RouterContextEntry(SQLModel, table=True):
    """One agent's upstream context within a router context of one owner (agent ``""``:
    the context itself, recorded before any agent served it). ``owner`` is the stored form
    of the owner scope (:func:`router.ids.owners.owner_key`; ``""``: the anonymous scope),
    so two owners who name the same context hold two conversations."""

    __tablename__ = "router_context_entries"
    __table_args__ = (UniqueConstraint("owner", "agent_id", "upstream_context_id"),)

    owner: str = Field(primary_key=True, max_length=OWNER_MAX_LENGTH)
    context_id: str = Field(primary_key=True, max_length=MAX_ID_LENGTH)
    agent_id: str = Field(primary_key=True, max_length=64)
    upstream_context_id: str | None = Field(default=None, max_length=MAX_ID_LENGTH)
    created_at: datetime = Field(sa_type=DateTime(timezone=True))


class TaskAliasBinding(SQLModel, table=True):
    """A task ID chosen by an A2A v0.1 client (``tasks/send`` ``id``) within one owner scope
    (stored as in :class:`RouterContextEntry`) and the router task it stands for (see
    :mod:`router.compat.aliases`)."""

    __tablename__ = "router_task_alias_bindings"

    owner: str = Field(primary_key=True, max_length=OWNER_MAX_LENGTH)
    alias: str = Field(primary_key=True, max_length=MAX_ID_LENGTH)
    task_id: str = Field(max_length=MAX_ID_LENGTH)
    created_at: datetime = Field(sa_type=DateTime(timezone=True))


class RouterTaskEntry(SQLModel, table=True):
    """A router task as ListTasks lists it: its IDs, owner, context and last known state;
    the mapping of a stored (non-token) task ID too (earlier versions' IDs, overlong upstream
    IDs). One row per upstream task (agent, upstream task ID), whoever else meets it."""

    __tablename__ = "router_task_entries"
    __table_args__ = (UniqueConstraint("agent_id", "upstream_task_id"),)

    task_id: str = Field(primary_key=True, max_length=MAX_ID_LENGTH)
    agent_id: str = Field(max_length=64)
    upstream_task_id: str = Field(max_length=MAX_ID_LENGTH)
    context_id: str | None = Field(default=None, index=True, max_length=MAX_ID_LENGTH)
    # the stored owner scope (router.ids.owners.task_owner): NULL for the anonymous scope,
    # as in every row of earlier versions
    owner: str | None = Field(default=None, index=True, max_length=OWNER_MAX_LENGTH)
    state: str | None = Field(default=None, max_length=64)
    created_at: datetime = Field(sa_type=DateTime(timezone=True), index=True)
    updated_at: datetime = Field(sa_type=DateTime(timezone=True), index=True)


class PushConfigRow(SQLModel, table=True):
    """A client's push notification config (:mod:`router.push.configs`), keyed by the relay's
    receiver: ``receiver_key`` (the unguessable path of the router's endpoint the agent posts
    to) and ``receiver_token`` (checked on every notification). The client's router task and
    config id (NULL while a config given on a send waits for its task), its webhook, token and
    ``authentication`` (1.0 shape), the A2A version it was set in (notifications are delivered
    in that shape), the owner scope itself (notifications' IDs are rewritten in it), the agent,
    and whether the agent accepted the router's config (``relayed``)."""

    __tablename__ = "router_push_configs"
    __table_args__ = (UniqueConstraint("task_id", "config_id"),)

    receiver_key: str = Field(primary_key=True, max_length=64)
    receiver_token: str = Field(max_length=64)
    task_id: str | None = Field(default=None, max_length=MAX_ID_LENGTH)
    config_id: str | None = Field(default=None, max_length=MAX_ID_LENGTH)
    scope: str = Field(sa_type=Text)
    agent_id: str = Field(max_length=64)
    version: str = Field(max_length=8)
    url: str = Field(max_length=2048)
    token: str | None = Field(default=None, max_length=1024)
    authentication: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    relayed: bool = False
    created_at: datetime = Field(sa_type=DateTime(timezone=True))


class PushOutboxRow(SQLModel, table=True):
    """One notification to deliver to a client's webhook (:mod:`router.push.outbox`): the
    body and headers as they will be sent, its state (``pending``, ``delivered``, ``dead``),
    attempts, when it is next due, and the lease of the replica delivering it. Rows of one
    task are delivered in ``id`` order."""

    __tablename__ = "router_push_outbox"
    __table_args__ = (Index("ix_router_push_outbox_due", "state", "next_at"),)

    id: int | None = Field(default=None, primary_key=True)
    task_id: str = Field(index=True, max_length=MAX_ID_LENGTH)
    config_id: str = Field(max_length=MAX_ID_LENGTH)
    url: str = Field(max_length=2048)
    headers: dict[str, str] = Field(sa_column=Column(JSON, nullable=False))
    body: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    state: str = Field(default="pending", max_length=16)
    attempts: int = 0
    next_at: datetime = Field(sa_type=DateTime(timezone=True))
    leased_by: str | None = Field(default=None, max_length=64)
    lease_until: datetime | None = Field(default=None, sa_type=DateTime(timezone=True))
    last_error: str | None = Field(default=None, max_length=512)
    created_at: datetime = Field(sa_type=DateTime(timezone=True))
    updated_at: datetime = Field(sa_type=DateTime(timezone=True))


class PushWatchRow(SQLModel, table=True):
    """A task the router follows itself to synthesize push notifications for an agent that
    sends none (:mod:`router.push.watches`): the router task, its agent and upstream task,
    and the lease of the replica following it (one replica per task)."""

    __tablename__ = "router_push_watches"

    task_id: str = Field(primary_key=True, max_length=MAX_ID_LENGTH)
    agent_id: str = Field(max_length=64)
    upstream_task_id: str = Field(max_length=MAX_ID_LENGTH)
    scope: str = Field(sa_type=Text)
    leased_by: str | None = Field(default=None, max_length=64)
    lease_until: datetime | None = Field(default=None, sa_type=DateTime(timezone=True))
    created_at: datetime = Field(sa_type=DateTime(timezone=True))


TABLES: tuple[type[SQLModel], ...] = (
    SigningKeyRow,
    IdSecretRow,
    RouterContextEntry,
    TaskAliasBinding,
    RouterTaskEntry,
    PushConfigRow,
    PushOutboxRow,
    PushWatchRow,
)

SCHEMA: tuple[type[SQLModel], ...] = REGISTRY_TABLES + TABLES
"""Every table of a Switchboard database: the registry's and the router's."""
