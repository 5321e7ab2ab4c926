"""The schema of Switchboard at commit 979ef09, frozen: what the baseline revision
(``versions/0001_baseline.py``) creates, and what it brings a database of an earlier version
to (:mod:`registry.migrations.legacy`).

Rendered once from 979ef09's ``router.tables.SCHEMA`` (the registry's and the router's
tables) and checked against databases that 979ef09 made (``tests/fixtures/schema/``). Like a
revision, it is never edited: a later change of the models is a new revision, written with
``sqlalchemy`` and ``alembic.op`` (``README.md``). Plain SQLAlchemy, no model classes: the
registry never imports the router, and the models move on while this stays.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

METADATA = MetaData(naming_convention={"ix": "ix_%(column_0_label)s"})  # SQLModel's
"""Every table of 979ef09, registry's and router's (its tables' names: :data:`NAMES`)."""

COUNTERS = ("catalog_version", "health_version")
"""The ``catalog_state`` rows every database has from its first start (value 0)."""

_TIME = DateTime(timezone=True)
_BIGINT = BigInteger().with_variant(Integer(), "sqlite")  # SQLite's row id must be INTEGER

Table(
    "agents",
    METADATA,
    Column("id", String(64), primary_key=True),
    Column("name", String, nullable=False),
    Column("description", String, nullable=False),
    Column("version", String, nullable=False),
    Column("card_format", String(8), nullable=False),
    Column("provider_organization", String),
    Column("provider_url", String),
    Column("documentation_url", String),
    Column("icon_url", String),
    Column("streaming", Boolean, nullable=False),
    Column("push_notifications", Boolean, nullable=False),
    Column("state_transition_history", Boolean, nullable=False),
    Column("extended_card", Boolean, nullable=False),
    Column("extensions", JSON),
    Column("default_input_modes", JSON),
    Column("default_output_modes", JSON),
    Column("signatures", JSON),
    Column("source", String(16), nullable=False),
    Column("source_url", String, unique=True),
    Column("card_url", String),
    Column("card_sha256", String(64), nullable=False),
    Column("card_raw", LargeBinary, nullable=False),
    Column("etag", String),
    Column("last_modified", String),
    Column("created_at", _TIME, nullable=False),
    Column("updated_at", _TIME, nullable=False),
    Column("fetched_at", _TIME, nullable=False),
    Column("verification_status", String(16), nullable=False, index=True),
    Column("verification_kid", String),
    Column("verification_reason", String),
    Column("verification_key_source", String),
    Column("verification_payload_form", String(32)),
    Column("verification_uncovered", JSON),
)

Table(
    "catalog_changes",
    METADATA,
    Column("version", _BIGINT, primary_key=True, autoincrement=False),
    Column("agent_id", String(64), nullable=False),
)

Table(
    "agent_interfaces",
    METADATA,
    Column("pk", Integer, primary_key=True),
    Column("agent_id", String, ForeignKey("agents.id"), nullable=False, index=True),
    Column("position", Integer, nullable=False),
    Column("url", String, nullable=False),
    Column("binding", String(128), nullable=False),
    Column("protocol_version", String(128), nullable=False, index=True),
    Column("tenant", String),
)

Table(
    "skills",
    METADATA,
    Column("pk", Integer, primary_key=True),
    Column("agent_id", String, ForeignKey("agents.id"), nullable=False, index=True),
    Column("skill_id", String, nullable=False, index=True),
    Column("position", Integer, nullable=False),
    Column("name", String, nullable=False),
    Column("description", String, nullable=False),
    Column("examples", JSON),
    UniqueConstraint("agent_id", "skill_id"),
)

Table(
    "skill_tags",
    METADATA,
    Column("pk", Integer, primary_key=True),
    Column("agent_id", String, ForeignKey("agents.id"), nullable=False, index=True),
    Column("skill_id", String, nullable=False),
    Column("position", Integer, nullable=False),
    Column("tag", String, nullable=False, index=True),
)

Table(
    "skill_modes",
    METADATA,
    Column("pk", Integer, primary_key=True),
    Column("agent_id", String, ForeignKey("agents.id"), nullable=False, index=True),
    Column("skill_id", String, nullable=False),
    Column("direction", String(6), nullable=False),
    Column("position", Integer, nullable=False),
    Column("media_type", String, nullable=False, index=True),
)

Table(
    "card_revisions",
    METADATA,
    Column("pk", Integer, primary_key=True),
    Column("agent_id", String, ForeignKey("agents.id"), nullable=False, index=True),
    Column("sha256", String(64), nullable=False),
    Column("fetched_at", _TIME, nullable=False),
    Column("card_url", String),
    Column("raw", LargeBinary, nullable=False),
    Column("diff", JSON),
    Column("verification_status", String(16)),
)

Table(
    "agent_refresh",
    METADATA,
    Column("agent_id", String(64), ForeignKey("agents.id"), primary_key=True),
    Column("status", String(16), nullable=False),
    Column("consecutive_failures", Integer, nullable=False),
    Column("last_error", String),
    Column("last_success", _TIME),
    Column("last_failure", _TIME),
    Column("last_checked", _TIME),
    Column("next_check_at", _TIME, index=True),
    Column("next_card_at", _TIME),
    Column("card_error", String),
    Column("interval", Float),
    Column("max_age", Integer),
    Column("etag", String),
    Column("last_modified", String),
    Column("claimed_until", _TIME),
    Column("claimed_by", String(128)),
    Column("revision", Integer, nullable=False, index=True),
)

Table(
    "leases",
    METADATA,
    Column("name", String(64), primary_key=True),
    Column("holder", String(128), nullable=False),
    Column("expires_at", _TIME, nullable=False),
)

Table(
    "catalog_state",
    METADATA,
    Column("key", String(64), primary_key=True),
    Column("value", Integer, nullable=False),
)

Table(
    "skill_examples",
    METADATA,
    Column("id", String(64), primary_key=True),
    Column("agent_id", String(64), nullable=False, index=True),
    Column("skill_id", String(256), nullable=False),
    Column("text", Text, nullable=False),
    Column("source", String(32), nullable=False),
    Column("task_id", String(1024)),
    Column("created_at", _TIME, nullable=False),
)

Table(
    "skill_vectors",
    METADATA,
    Column("model_id", String(255), primary_key=True),
    Column("text_sha256", String(64), primary_key=True),
    Column("dim", Integer, nullable=False),
    Column("vector", LargeBinary, nullable=False),
    Column("created_at", _TIME, nullable=False),
)

Table(
    "trust_anchors",
    METADATA,
    Column("id", String(64), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("kid", String),
    Column("jwk", JSON),
    Column("jwks_url", String, unique=True),
    Column("source", String(16), nullable=False),
    Column("created_at", _TIME, nullable=False),
)

Table(
    "agent_policies",
    METADATA,
    Column("agent_id", String(64), primary_key=True),
    Column("tenant", String(256)),
    Column("rules", JSON),
    Column("created_at", _TIME, nullable=False),
    Column("updated_at", _TIME, nullable=False),
    Column("updated_by", String(256), nullable=False),
)

Table(
    "api_keys",
    METADATA,
    Column("id", String(32), primary_key=True),
    Column("prefix", String(64), nullable=False),
    Column("key_sha256", String(64), nullable=False),
    Column("subject", String(256), nullable=False, index=True),
    Column("tenant", String(256), index=True),
    Column("groups", JSON),
    Column("roles", JSON),
    Column("description", Text),
    Column("created_at", _TIME, nullable=False, index=True),
    Column("created_by", String(512), nullable=False),
    Column("expires_at", _TIME),
    Column("revoked_at", _TIME),
    Column("revoked_by", String(512)),
    Column("rotated_to", String(32)),
)

Table(
    "audit_log",
    METADATA,
    Column("id", _BIGINT, primary_key=True),
    Column("at", _TIME, nullable=False, index=True),
    Column("actor", String(512), nullable=False, index=True),
    Column("subject", String(256)),
    Column("tenant", String(256)),
    Column("method", String(16), nullable=False),
    Column("path", Text, nullable=False),
    Column("action", String(512), nullable=False, index=True),
    Column("target", String(1024)),
    Column("status", Integer, nullable=False),
    Column("details", JSON),
)

Table(
    "agent_credentials",
    METADATA,
    Column("agent_id", String(64), ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("header_name", String(256), nullable=False),
    Column("header_scheme", String(64), nullable=False),
    Column("token_url", String(2048)),
    Column("client_id", String(1024)),
    Column("scopes", JSON),
    Column("audience", String(2048)),
    Column("secret", Text),
    Column("forward_client_auth", Boolean, nullable=False),
    Column("agent_created_at", _TIME),
    Column("updated_at", _TIME, nullable=False),
    Column("updated_by", String(256), nullable=False),
)

Table(
    "router_signing_keys",
    METADATA,
    Column("kid", String(128), primary_key=True),
    Column("slot", Integer, unique=True),
    Column("jwk", JSON, nullable=False),
    Column("created_at", _TIME, nullable=False),
)

Table(
    "router_secrets",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column("secret", String(128), nullable=False),
    Column("created_at", _TIME, nullable=False),
)

Table(
    "router_context_entries",
    METADATA,
    Column("owner", String(128), primary_key=True),
    Column("context_id", String(512), primary_key=True),
    Column("agent_id", String(64), primary_key=True),
    Column("upstream_context_id", String(512)),
    Column("created_at", _TIME, nullable=False),
    UniqueConstraint("owner", "agent_id", "upstream_context_id"),
)

Table(
    "router_task_alias_bindings",
    METADATA,
    Column("owner", String(128), primary_key=True),
    Column("alias", String(512), primary_key=True),
    Column("task_id", String(512), nullable=False),
    Column("created_at", _TIME, nullable=False),
)

Table(
    "router_task_entries",
    METADATA,
    Column("task_id", String(512), primary_key=True),
    Column("agent_id", String(64), nullable=False),
    Column("upstream_task_id", String(512), nullable=False),
    Column("context_id", String(512), index=True),
    Column("owner", String(128), index=True),
    Column("state", String(64)),
    Column("created_at", _TIME, nullable=False, index=True),
    Column("updated_at", _TIME, nullable=False, index=True),
    UniqueConstraint("agent_id", "upstream_task_id"),
)

Table(
    "router_push_configs",
    METADATA,
    Column("receiver_key", String(64), primary_key=True),
    Column("receiver_token", String(64), nullable=False),
    Column("task_id", String(512)),
    Column("config_id", String(512)),
    Column("scope", Text, nullable=False),
    Column("agent_id", String(64), nullable=False),
    Column("version", String(8), nullable=False),
    Column("url", String(2048), nullable=False),
    Column("token", String(1024)),
    Column("authentication", JSON),
    Column("relayed", Boolean, nullable=False),
    Column("created_at", _TIME, nullable=False),
    UniqueConstraint("task_id", "config_id"),
)

Table(
    "router_push_outbox",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column("task_id", String(512), nullable=False, index=True),
    Column("config_id", String(512), nullable=False),
    Column("url", String(2048), nullable=False),
    Column("headers", JSON, nullable=False),
    Column("body", JSON, nullable=False),
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_at", _TIME, nullable=False),
    Column("leased_by", String(64)),
    Column("lease_until", _TIME),
    Column("last_error", String(512)),
    Column("created_at", _TIME, nullable=False),
    Column("updated_at", _TIME, nullable=False),
    Index("ix_router_push_outbox_due", "state", "next_at"),
)

Table(
    "router_push_watches",
    METADATA,
    Column("task_id", String(512), primary_key=True),
    Column("agent_id", String(64), nullable=False),
    Column("upstream_task_id", String(512), nullable=False),
    Column("scope", Text, nullable=False),
    Column("leased_by", String(64)),
    Column("lease_until", _TIME),
    Column("created_at", _TIME, nullable=False),
)

NAMES = frozenset(METADATA.tables)
"""The names of the tables of 979ef09."""
