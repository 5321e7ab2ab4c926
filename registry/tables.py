"""The registry's database tables, all in one place; :data:`TABLES` is what
:meth:`registry.store.Store.create_schema` creates for the registry."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Integer,
    LargeBinary,
    Text,
    UniqueConstraint,
)
from sqlmodel import Field, SQLModel


class AgentRow(SQLModel, table=True):
    """One registered agent: identity, capabilities and where its card comes from."""

    __tablename__ = "agents"

    id: str = Field(primary_key=True, max_length=64)
    name: str
    description: str = ""
    version: str = ""
    card_format: str = Field(max_length=8)
    provider_organization: str | None = None
    provider_url: str | None = None
    documentation_url: str | None = None
    icon_url: str | None = None
    streaming: bool = False
    push_notifications: bool = False
    state_transition_history: bool = False
    extended_card: bool = False
    extensions: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))
    default_input_modes: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    default_output_modes: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    signatures: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))
    source: str = Field(max_length=16)
    source_url: str | None = Field(default=None, unique=True)
    card_url: str | None = None
    card_sha256: str = Field(max_length=64)
    card_raw: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    etag: str | None = None
    last_modified: str | None = None
    created_at: datetime = Field(sa_type=DateTime(timezone=True))
    updated_at: datetime = Field(sa_type=DateTime(timezone=True))
    fetched_at: datetime = Field(sa_type=DateTime(timezone=True))
    verification_status: str = Field(default="unsigned", max_length=16, index=True)
    verification_kid: str | None = None
    verification_reason: str | None = None
    verification_key_source: str | None = None
    verification_payload_form: str | None = Field(default=None, max_length=32)
    verification_uncovered: list[str] = Field(default_factory=list, sa_column=Column(JSON))


class InterfaceRow(SQLModel, table=True):
    """An endpoint of an agent."""

    __tablename__ = "agent_interfaces"

    pk: int | None = Field(default=None, primary_key=True)
    agent_id: str = Field(foreign_key="agents.id", index=True)
    position: int
    url: str
    binding: str = Field(max_length=128)
    protocol_version: str = Field(max_length=128, index=True)
    tenant: str | None = None


class SkillRow(SQLModel, table=True):
    """A skill of an agent."""

    __tablename__ = "skills"
    __table_args__ = (UniqueConstraint("agent_id", "skill_id"),)

    pk: int | None = Field(default=None, primary_key=True)
    agent_id: str = Field(foreign_key="agents.id", index=True)
    skill_id: str = Field(index=True)
    position: int
    name: str
    description: str = ""
    examples: list[str] = Field(default_factory=list, sa_column=Column(JSON))


class SkillTagRow(SQLModel, table=True):
    """A tag of a skill (one row per tag, for indexed lookups)."""

    __tablename__ = "skill_tags"

    pk: int | None = Field(default=None, primary_key=True)
    agent_id: str = Field(foreign_key="agents.id", index=True)
    skill_id: str
    position: int
    tag: str = Field(index=True)


class SkillModeRow(SQLModel, table=True):
    """An input or output media type of a skill (the card's defaults already applied)."""

    __tablename__ = "skill_modes"

    pk: int | None = Field(default=None, primary_key=True)
    agent_id: str = Field(foreign_key="agents.id", index=True)
    skill_id: str
    direction: str = Field(max_length=6)  # "input" | "output"
    position: int
    media_type: str = Field(index=True)


class CardRevisionRow(SQLModel, table=True):
    """A card as it was fetched at one time; a new row whenever its bytes change."""

    __tablename__ = "card_revisions"

    pk: int | None = Field(default=None, primary_key=True)
    agent_id: str = Field(foreign_key="agents.id", index=True)
    sha256: str = Field(max_length=64)
    fetched_at: datetime = Field(sa_type=DateTime(timezone=True))
    card_url: str | None = None
    raw: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    # what changed against the previous revision (None for the first one); see registry.diff
    diff: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    verification_status: str | None = Field(default=None, max_length=16)


class RefreshRow(SQLModel, table=True):
    """The crawler's state of one agent: when to check it next and how the checks went.

    Kept apart from ``agents`` so that a routine check never rewrites the card's rows nor
    bumps the catalog version; a change of what routing or the API's health shows bumps
    ``health_version`` instead. ``next_check_at`` is the next check (the endpoint is probed;
    the card is fetched too when ``next_card_at`` has come); ``claimed_until`` marks a check
    in flight, so that no other replica or request runs the same one.
    """

    __tablename__ = "agent_refresh"

    agent_id: str = Field(primary_key=True, foreign_key="agents.id", max_length=64)
    status: str = Field(default="healthy", max_length=16)
    consecutive_failures: int = 0
    last_error: str | None = None
    last_success: datetime | None = Field(default=None, sa_type=DateTime(timezone=True))
    last_failure: datetime | None = Field(default=None, sa_type=DateTime(timezone=True))
    last_checked: datetime | None = Field(default=None, sa_type=DateTime(timezone=True))
    next_check_at: datetime | None = Field(
        default=None, sa_type=DateTime(timezone=True), index=True
    )
    next_card_at: datetime | None = Field(default=None, sa_type=DateTime(timezone=True))
    card_error: str | None = None  # why the last card fetch failed (the agent may be up)
    interval: float | None = None  # the operator's per-agent refresh interval, seconds
    max_age: int | None = None  # Cache-Control max-age of the last card response
    etag: str | None = None  # validators of the last response (the card may be unchanged)
    last_modified: str | None = None
    claimed_until: datetime | None = Field(default=None, sa_type=DateTime(timezone=True))
    claimed_by: str | None = Field(default=None, max_length=128)
    # the health_version this row was last written at (incremental reloads)
    revision: int = Field(default=0, index=True)


class LeaseRow(SQLModel, table=True):
    """A named lease: the replica that holds it until ``expires_at`` runs that job."""

    __tablename__ = "leases"

    name: str = Field(primary_key=True, max_length=64)
    holder: str = Field(max_length=128)
    expires_at: datetime = Field(sa_type=DateTime(timezone=True))


class CatalogStateRow(SQLModel, table=True):
    """Named counters; ``catalog_version`` grows with every change to the catalog."""

    __tablename__ = "catalog_state"

    key: str = Field(primary_key=True, max_length=64)
    value: int = 0


class CatalogChangeRow(SQLModel, table=True):
    """Which agent each catalog version changed (written, or removed), so that another
    replica applies only those agents instead of reloading the catalog; rows older than
    :data:`registry.store.CHANGES_KEPT` versions are pruned."""

    __tablename__ = "catalog_changes"

    version: int = Field(
        sa_column=Column(
            BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=False
        )
    )
    agent_id: str = Field(max_length=64)


class SkillExampleRow(SQLModel, table=True):
    """One learned example of one skill of one agent."""

    __tablename__ = "skill_examples"

    id: str = Field(primary_key=True, max_length=64)
    agent_id: str = Field(index=True, max_length=64)
    skill_id: str = Field(max_length=256)
    text: str = Field(sa_type=Text)
    source: str = Field(default="feedback", max_length=32)
    task_id: str | None = Field(default=None, max_length=1024)
    created_at: datetime = Field(sa_type=DateTime(timezone=True))


class SkillVectorRow(SQLModel, table=True):
    """The embedding of one text by one model."""

    __tablename__ = "skill_vectors"

    model_id: str = Field(primary_key=True, max_length=255)
    text_sha256: str = Field(primary_key=True, max_length=64)
    dim: int
    vector: bytes = Field(sa_type=LargeBinary)
    created_at: datetime = Field(sa_type=DateTime(timezone=True))


class TrustAnchorRow(SQLModel, table=True):
    """One trust anchor: a public JWK or a JWKS URL."""

    __tablename__ = "trust_anchors"

    id: str = Field(primary_key=True, max_length=64)
    kind: str = Field(max_length=16)  # "jwk" | "jwks_url"
    kid: str | None = None
    jwk: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    jwks_url: str | None = Field(default=None, unique=True)
    source: str = Field(max_length=16)  # "api" | "seed"
    created_at: datetime = Field(sa_type=DateTime(timezone=True))


class AgentPolicyRow(SQLModel, table=True):
    """The access policy of one agent: its tenant (None: shared) and allow rules (JSON: a
    list of ``{"tenants", "groups", "subjects", "skills"}`` lists); see
    :mod:`registry.access.policy`. Kept when the agent is removed."""

    __tablename__ = "agent_policies"

    agent_id: str = Field(primary_key=True, max_length=64)
    tenant: str | None = Field(default=None, max_length=256)
    rules: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))
    created_at: datetime = Field(sa_type=DateTime(timezone=True))
    updated_at: datetime = Field(sa_type=DateTime(timezone=True))
    updated_by: str = Field(default="", max_length=256)


class AgentCredentialRow(SQLModel, table=True):
    """The outbound credential of one agent: a static header or OAuth2 client credentials.

    ``secret`` is encrypted (a Fernet token, see :mod:`registry.access.secrets`): the header
    value, or the OAuth2 client secret. Deleting the agent deletes its credential.
    ``agent_created_at`` binds it to that registration of the agent: an agent removed and
    registered again under the same id does not inherit it.
    """

    __tablename__ = "agent_credentials"

    agent_id: str = Field(
        primary_key=True, max_length=64, foreign_key="agents.id", ondelete="CASCADE"
    )
    kind: str = Field(max_length=16)  # "header" | "oauth2" | "forward"
    header_name: str = Field(default="Authorization", max_length=256)
    header_scheme: str = Field(default="", max_length=64)
    token_url: str | None = Field(default=None, max_length=2048)
    client_id: str | None = Field(default=None, max_length=1024)
    scopes: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    audience: str | None = Field(default=None, max_length=2048)
    secret: str | None = Field(default=None, sa_type=Text)
    forward_client_auth: bool = False
    agent_created_at: datetime | None = Field(default=None, sa_type=DateTime(timezone=True))
    updated_at: datetime = Field(sa_type=DateTime(timezone=True))
    updated_by: str = Field(default="", max_length=256)


class ApiKeyRow(SQLModel, table=True):
    """A client's API key: who it stands for and its lifetime; never the key itself, only the
    SHA-256 of the whole key (see :mod:`registry.access.apikeys`)."""

    __tablename__ = "api_keys"

    id: str = Field(primary_key=True, max_length=32)
    prefix: str = Field(max_length=64)  # sbk_<id>: what lists show
    key_sha256: str = Field(max_length=64)
    subject: str = Field(max_length=256, index=True)
    tenant: str | None = Field(default=None, max_length=256, index=True)
    groups: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    roles: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    description: str | None = Field(default=None, sa_type=Text)
    created_at: datetime = Field(sa_type=DateTime(timezone=True), index=True)
    created_by: str = Field(max_length=512)
    expires_at: datetime | None = Field(default=None, sa_type=DateTime(timezone=True))
    # the key is refused from this time on; a rotation with a grace period sets a future time
    revoked_at: datetime | None = Field(default=None, sa_type=DateTime(timezone=True))
    revoked_by: str | None = Field(default=None, max_length=512)
    rotated_to: str | None = Field(
        default=None, max_length=32
    )  # the id of the key that replaced it


class AuditRow(SQLModel, table=True):
    """One admin write: who made it, what it was, when, and how it ended (HTTP status)."""

    __tablename__ = "audit_log"

    # BIGINT on PostgreSQL; SQLite's autoincrementing row id must be declared INTEGER
    id: int | None = Field(
        default=None,
        sa_column=Column(BigInteger().with_variant(Integer(), "sqlite"), primary_key=True),
    )
    at: datetime = Field(sa_type=DateTime(timezone=True), index=True)
    actor: str = Field(max_length=512, index=True)
    subject: str | None = Field(default=None, max_length=256)
    tenant: str | None = Field(default=None, max_length=256)
    method: str = Field(max_length=16)
    path: str = Field(sa_type=Text)
    action: str = Field(max_length=512, index=True)
    target: str | None = Field(default=None, max_length=1024)
    status: int
    details: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))


TABLES: tuple[type[SQLModel], ...] = (
    AgentRow,
    CatalogChangeRow,
    InterfaceRow,
    SkillRow,
    SkillTagRow,
    SkillModeRow,
    CardRevisionRow,
    RefreshRow,
    LeaseRow,
    CatalogStateRow,
    SkillExampleRow,
    SkillVectorRow,
    TrustAnchorRow,
    AgentPolicyRow,
    ApiKeyRow,
    AuditRow,
    AgentCredentialRow,
)
