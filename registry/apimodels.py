"""The admin API's request bodies and responses as pydantic models, for the OpenAPI document.

The handlers read bodies and write views themselves (with the API's own error messages);
these models say what those look like, and :mod:`registry.openapi` turns them into the
document's schemas. Responses forbid members they do not name, so a test that validates real
answers against the document notices a view that grew a field the document does not have.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from registry.cards import Capabilities, CardFormat, Interface, Provider, Skill
from registry.health import HealthStatus
from registry.records import Source, VerificationRecord

MAX_REFRESH_INTERVAL = 30 * 86400  # seconds, as registry.api enforces
AGENT_ID_PATTERN = "^[a-z0-9][a-z0-9._-]{0,63}$"


class ApiModel(BaseModel):
    """A shape of the API: members it does not name are not allowed."""

    model_config = ConfigDict(extra="forbid")


# --- errors ----------------------------------------------------------------------------------


class ErrorInfo(ApiModel):
    """What went wrong: a stable code, a message for people, details for programs."""

    code: str = Field(examples=["invalid_parameter", "not_found", "unauthorized"])
    message: str
    details: Any = None


class Error(ApiModel):
    """Every 4xx and 5xx answer of the admin API."""

    error: ErrorInfo


# --- agents ----------------------------------------------------------------------------------


class AgentSource(ApiModel):
    """How the agent came in: a base URL, an exact card URL, or a pushed card."""

    kind: Source
    url: str | None


class AgentHealth(ApiModel):
    """An agent's health and refresh schedule."""

    status: HealthStatus
    last_error: str | None
    last_success: datetime | None
    last_failure: datetime | None
    last_checked: datetime | None
    consecutive_failures: int
    next_check_at: datetime | None
    next_card_at: datetime | None
    refresh_interval: float | None = Field(description="This agent's own interval; null: default.")
    card_error: str | None


class Agent(ApiModel):
    """An agent: its normalized card, where it came from, verification, health."""

    id: str
    name: str
    description: str
    version: str
    card_format: CardFormat
    protocol_versions: list[str]
    provider: Provider | None
    documentation_url: str | None
    icon_url: str | None
    interfaces: list[Interface]
    capabilities: Capabilities
    default_input_modes: list[str]
    default_output_modes: list[str]
    skills: list[Skill]
    source: AgentSource
    card_url: str | None
    card_sha256: str
    created_at: datetime
    updated_at: datetime
    fetched_at: datetime
    verification: VerificationRecord
    routable: bool = Field(description="Whether routing may choose this agent.")
    health: AgentHealth
    score: float | None = Field(None, description="Searches with q only: the text score.")
    matched_skills: list[str] | None = Field(
        None, description="Searches with q or skill filters only: the skills that matched."
    )
    card: dict[str, Any] | None = Field(
        None, description="Single-agent answers only: the card as fetched or pushed."
    )


class AgentList(ApiModel):
    """A page of agents."""

    agents: list[Agent]
    next_cursor: str | None = Field(description="Pass as cursor for the next page; null: last.")


class AgentRef(ApiModel):
    """The agent of a skill row."""

    id: str
    name: str


class SkillRow(Skill):
    """One skill with its agent."""

    model_config = ConfigDict(extra="forbid")

    agent: AgentRef
    score: float | None = Field(None, description="Searches with q only: the text score.")


class SkillList(ApiModel):
    """A page of skills."""

    skills: list[SkillRow]
    next_cursor: str | None


class Registration(ApiModel):
    """Exactly one of ``url`` or ``card``; ``id`` and ``refresh_interval`` are optional."""

    url: str | None = Field(
        None, min_length=1, max_length=2048, description="An agent base URL or its card URL."
    )
    card: dict[str, Any] | None = Field(None, description="The agent card JSON (pushed).")
    id: str | None = Field(None, pattern=AGENT_ID_PATTERN, description="Default: from the name.")
    refresh_interval: float | None = Field(
        None,
        ge=1,
        le=MAX_REFRESH_INTERVAL,
        description="Seconds between refreshes of this agent; null: SWITCHBOARD_REFRESH_INTERVAL.",
    )


class AgentSettings(ApiModel):
    """An agent's settings."""

    refresh_interval: float | None = Field(
        ge=1, le=MAX_REFRESH_INTERVAL, description="Seconds between refreshes; null: the default."
    )


class Card(RootModel[dict[str, Any]]):
    """An A2A agent card (the 0.1 to 1.0 shapes)."""


class Refresh(ApiModel):
    """An agent after fetching its card again."""

    agent: Agent
    changed: bool = Field(description="Whether the card changed.")


class Revision(ApiModel):
    """One stored version of an agent's card."""

    sha256: str
    fetched_at: datetime
    card_url: str | None
    size: int
    verification_status: str | None
    initial: bool = Field(description="The first revision (its diff is empty).")
    diff: dict[str, Any] | None = Field(
        description="What changed from the previous revision (docs/admin-api.md); null: not kept."
    )


class Revisions(ApiModel):
    """An agent's card revisions, newest first."""

    revisions: list[Revision]


class RefreshRequest(ApiModel):
    """Empty: the checks due now. ``all``: every agent now. ``ids``: these agents now."""

    all: bool = False
    ids: list[str] | None = None


class RefreshFailure(ApiModel):
    """An agent whose check failed."""

    id: str
    error: str


class RefreshReport(ApiModel):
    """What a run of checks did."""

    checked: int
    changed: list[str]
    failed: list[RefreshFailure]
    skipped: list[str] = Field(description="Being checked by another replica at that moment.")


class Stats(ApiModel):
    """Catalog counts."""

    agents: int
    skills: int
    catalog_version: int
    by_protocol_version: dict[str, int]
    by_card_format: dict[str, int]
    by_health: dict[str, int]
    by_verification: dict[str, int]
    version: str = Field(description="Switchboard's version (the installed package's).")


# --- trusted keys ------------------------------------------------------------------------------


class TrustedKey(ApiModel):
    """A trust anchor: a public JWK or a JWKS URL."""

    id: str = Field(description="A JWK's RFC 7638 thumbprint, or jwks-<16 hex> for a URL.")
    kind: Literal["jwk", "jwks_url"]
    kid: str | None
    kty: str | None
    alg: str | None
    jwk: dict[str, Any] | None = Field(description="Public members only.")
    jwks_url: str | None
    source: Literal["api", "seed"]
    created_at: datetime


class TrustedKeyList(ApiModel):
    """Every trust anchor, oldest first."""

    keys: list[TrustedKey]


class NewTrustedKey(ApiModel):
    """Exactly one of ``jwk`` or ``jwks_url``."""

    jwk: dict[str, Any] | None = Field(None, description="A public JWK (EC, RSA or OKP).")
    jwks_url: str | None = Field(
        None, min_length=1, max_length=2048, description="A JWKS URL, fetched once to check it."
    )


# --- learned examples ----------------------------------------------------------------------------


class LearnedExample(ApiModel):
    """A message an operator taught as an example of a skill."""

    id: str
    agent_id: str
    skill_id: str
    text: str
    source: str
    task_id: str | None
    created_at: datetime


class ExampleList(ApiModel):
    """A skill's learned examples, oldest first, and its card's own."""

    examples: list[LearnedExample]
    card_examples: list[str]


# --- outbound credentials ------------------------------------------------------------------------


class NewCredential(ApiModel):
    """An agent's outbound credential: a static header (``kind: header``), OAuth2 client
    credentials (``kind: oauth2``), or only the client's own Authorization passed through
    (``forward_client_auth: true`` without a kind)."""

    kind: Literal["header", "oauth2", "forward"] | None = Field(
        None, description="Omitted (or forward) with forward_client_auth: pass-through only."
    )
    header: str | None = Field(
        None, max_length=256, description="header: the header name (default Authorization)."
    )
    scheme: str | None = Field(
        None,
        max_length=64,
        description='header: the scheme before the value ("Bearer" by default for '
        'Authorization, none for other headers; "" for none).',
    )
    value: str | None = Field(
        None, min_length=1, max_length=8192, description="header: the secret value."
    )
    token_url: str | None = Field(
        None, min_length=1, max_length=2048, description="oauth2: the token endpoint."
    )
    client_id: str | None = Field(None, min_length=1, max_length=1024)
    client_secret: str | None = Field(
        None, min_length=1, max_length=8192, description="oauth2: encrypted at rest."
    )
    scopes: list[str] = Field(default_factory=list, max_length=64)
    audience: str | None = Field(None, max_length=2048, description="oauth2: sent if given.")
    forward_client_auth: bool = Field(
        False,
        description="Pass the client's own Authorization header to this agent (and add no "
        "other credential).",
    )


class CredentialView(ApiModel):
    """An agent's outbound credential, without its secret."""

    agent_id: str
    kind: Literal["header", "oauth2", "forward"]
    header: str | None
    scheme: str | None
    token_url: str | None
    client_id: str | None
    scopes: list[str]
    audience: str | None
    has_secret: bool
    forward_client_auth: bool
    problem: str | None = Field(description="Why the stored secret cannot be used, if so.")
    updated_at: datetime
    updated_by: str
