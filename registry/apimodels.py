"""The admin API's request bodies and responses as pydantic models, for the OpenAPI document.

The handlers read bodies and write views themselves (with the API's own error messages);
these models say what those look like, and :mod:`registry.openapi` turns them into the
document's schemas. Responses forbid members they do not name, so a test that validates real
answers against the document notices a view that grew a field the document does not have.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, RootModel, ValidationInfo
from pydantic_core import PydanticCustomError

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
    score: float | None = Field(
        None,
        description="Searches with q only: by meaning, the best matched skill's score (0 to 1, "
        "the router's); by words, the BM25 score of the best skill plus half the agent's own.",
    )
    matched_skills: list[str] | None = Field(
        None, description="Searches with q or skill filters only: the skills that matched."
    )
    card: dict[str, Any] | None = Field(
        None, description="Single-agent answers only: the card as fetched or pushed."
    )
    vectors: Literal["ready", "pending"] | None = Field(
        None,
        description="Writes only, when routing goes by meaning: whether the skills' vectors "
        "are stored (pending: the model is loading or the embedding failed; computed as soon "
        "as they can be).",
    )
    stale_workers: int | None = Field(
        None,
        description="Writes only: workers that had not applied the write within "
        "SWITCHBOARD_WRITE_ACK_TIMEOUT (each catches up before its next request).",
    )


def _match() -> Any:
    return Field(None, description="Searches with q only: how q was ranked (see match).")


def _fallback() -> Any:
    return Field(
        None,
        description="Only when q was to be ranked by meaning but went by words: why (the "
        "model is loading or missing, SWITCHBOARD_MATCHER=lexical, or the text could not be "
        "embedded).",
    )


class AgentList(ApiModel):
    """A page of agents."""

    agents: list[Agent]
    next_cursor: str | None = Field(description="Pass as cursor for the next page; null: last.")
    match: Literal["semantic", "lexical"] | None = _match()
    match_fallback: str | None = _fallback()


class AgentRef(ApiModel):
    """The agent of a skill row."""

    id: str
    name: str


class SkillRow(Skill):
    """One skill with its agent."""

    model_config = ConfigDict(extra="forbid")

    agent: AgentRef
    score: float | None = Field(
        None,
        description="Searches with q only: by meaning, the router's score (0 to 1); by words, "
        "the BM25 score.",
    )


class SkillList(ApiModel):
    """A page of skills."""

    skills: list[SkillRow]
    next_cursor: str | None
    match: Literal["semantic", "lexical"] | None = _match()
    match_fallback: str | None = _fallback()


class Registration(ApiModel):
    """Exactly one of ``url`` or ``card``; ``id``, ``refresh_interval`` and ``tenant`` are
    optional."""

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
    tenant: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="Register the agent as a tenant's (its access policy's tenant); "
        "null or left out: a shared agent.",
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


# --- access policies -----------------------------------------------------------------------------


class PolicyRule(ApiModel):
    """An allow rule: it matches a caller when every non-empty list among ``tenants``,
    ``groups`` and ``subjects`` holds the caller's tenant, one of its groups, its subject;
    it grants the listed ``skills`` (empty: the whole agent)."""

    tenants: list[str] = Field(default_factory=list, description="Callers of these tenants.")
    groups: list[str] = Field(default_factory=list, description="Callers in one of these groups.")
    subjects: list[str] = Field(default_factory=list, description="These callers (subjects).")
    skills: list[str] = Field(
        default_factory=list, description="The skill ids granted; empty: the whole agent."
    )


class AgentPolicy(ApiModel):
    """Who may see and use an agent (docs/admin-api.md#access-policies)."""

    agent_id: str
    tenant: str | None = Field(description="The agent's tenant; null: shared by every tenant.")
    rules: list[PolicyRule] = Field(
        description="Allow rules; none: SWITCHBOARD_AGENT_ACCESS decides."
    )
    updated_at: datetime | None = Field(description="null: no policy stored (the default).")
    updated_by: str | None = Field(description="Who set it last.")


class PolicyList(ApiModel):
    """Every stored policy, by agent id."""

    policies: list[AgentPolicy]


class NewPolicy(ApiModel):
    """An agent's whole policy: it replaces the one stored."""

    tenant: str | None = Field(
        None, min_length=1, max_length=256, description="null or left out: a shared agent."
    )
    rules: list[PolicyRule] = Field(
        default_factory=list, max_length=100, description="At most 100 rules, 1000 names."
    )


# --- clients (API keys) and the audit log ----------------------------------------------------

_INVALID = "invalid_parameter"
MAX_GRACE = 30 * 86400  # seconds, as registry.access.apikeys enforces


class ApiKey(ApiModel):
    """A client's API key: the principal it stands for and its lifetime (never the key)."""

    id: str = Field(description="12 hex digits: public, named in lists, logs and the audit log.")
    prefix: str = Field(description="sbk_<id>: how the key starts.")
    status: Literal["active", "revoked", "expired"]
    subject: str
    tenant: str | None
    groups: list[str]
    roles: list[Literal["admin", "reader"]] = Field(description="Admin API roles; [] for none.")
    description: str | None
    created_at: datetime
    created_by: str = Field(description="Who created it (an audit actor label).")
    expires_at: datetime | None
    revoked_at: datetime | None = Field(
        description="Refused from this time on (a rotated key's grace period ends then)."
    )
    revoked_by: str | None
    rotated_to: str | None = Field(description="The id of the key that replaced this one.")


class NewApiKey(ApiKey):
    """A key just created or rotated, with the key itself: shown this once."""

    key: str = Field(description="sbk_<id>_<secret>: store it now, it is never shown again.")


class ApiKeyList(ApiModel):
    """A page of API keys, newest first."""

    clients: list[ApiKey]
    next_cursor: str | None = Field(description="Pass as cursor for the next page; null: last.")


class NewClient(ApiModel):
    """The principal of a new API key, and its lifetime."""

    subject: str = Field(min_length=1, max_length=256, description="Who the key stands for.")
    tenant: str | None = Field(None, min_length=1, max_length=256)
    groups: list[str] = Field(default_factory=list, description="For access policies.")
    roles: list[Literal["admin", "reader"]] = Field(
        default_factory=list, description="Admin API roles; none for a client of the router."
    )
    description: str | None = Field(None, max_length=1024)
    expires_at: datetime | None = Field(
        None, description="ISO 8601 with a timezone, in the future; null: never."
    )


class Rotation(ApiModel):
    """How long the old key keeps working beside the new one."""

    grace_seconds: float = Field(
        0, ge=0, le=MAX_GRACE, description="0: the old key is refused at once."
    )


class AuditEntry(ApiModel):
    """One admin write: who, what, when, and how it ended."""

    id: int
    at: datetime
    actor: str = Field(description="admin-token, api-key:<id> <subject>, jwt:<subject>, ...")
    subject: str | None
    tenant: str | None
    method: str
    path: str
    action: str = Field(description="Method and route, e.g. DELETE /api/v1/agents/{agent_id}.")
    target: str | None = Field(description="The resource: the ids in the path, or the new id.")
    status: int = Field(description="The HTTP status of the answer.")
    details: dict[str, Any] | None


class AuditLog(ApiModel):
    """A page of the audit log, newest first."""

    entries: list[AuditEntry]
    next_cursor: str | None


def _page_size(value: Any, info: ValidationInfo) -> int:
    maximum = (info.context or {}).get("max_page_size", 500)
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= maximum:
        raise PydanticCustomError(
            _INVALID,
            "limit must be a whole number from 1 to {maximum}",
            {"parameter": "limit", "value": value, "maximum": maximum},
        )
    return int(value)


def _aware_time(value: Any, info: ValidationInfo) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise PydanticCustomError(
            _INVALID,
            "{parameter} must be an ISO 8601 time with a timezone, e.g. 2030-01-31T00:00:00Z",
            {"parameter": info.field_name, "value": value},
        )
    return parsed


_Limit = Annotated[int | None, BeforeValidator(_page_size)]
_Text = Annotated[str | None, BeforeValidator(lambda value: value or None)]


class ClientsQuery(BaseModel):
    """The query of ``GET /api/v1/clients``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    limit: _Limit = Field(None, description="Page size (default SWITCHBOARD_PAGE_SIZE).")
    cursor: _Text = Field(None, description="The next_cursor of the previous page, unchanged.")
    subject: _Text = Field(None, description="Only the keys of this subject.")
    tenant: _Text = Field(None, description="Only the keys of this tenant.")


class AuditQuery(BaseModel):
    """The query of ``GET /api/v1/audit``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    limit: _Limit = Field(None, description="Page size (default SWITCHBOARD_PAGE_SIZE).")
    cursor: _Text = Field(None, description="The next_cursor of the previous page, unchanged.")
    actor: _Text = Field(None, description="Entries whose actor label or subject is this.")
    action: _Text = Field(None, description="Entries of this action, e.g. POST /api/v1/agents.")
    since: Annotated[datetime | None, BeforeValidator(_aware_time)] = Field(
        None, description="Entries at or after this time (ISO 8601 with a timezone)."
    )


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
