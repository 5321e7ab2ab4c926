"""The registry's record of one agent: its normalized card plus where and when it came from."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from registry.cards import AgentCard

Source = Literal["url", "card_url", "push"]
VerificationStatus = Literal["verified", "unsigned", "invalid", "untrusted-key"]


def utcnow() -> datetime:
    """The current time, timezone-aware UTC, to the microsecond."""
    return datetime.now(UTC)


class VerificationRecord(BaseModel):
    """The outcome of checking a card's signatures, as stored and shown."""

    status: VerificationStatus = "unsigned"
    kid: str | None = None
    reason: str | None = None
    key_source: str | None = None
    payload_form: str | None = None
    uncovered_fields: list[str] = Field(default_factory=list)


class AgentRecord(BaseModel):
    """An indexed agent. The raw card bytes live in the store, not here (they can be large)."""

    id: str
    card: AgentCard
    source: Source
    source_url: str | None = None
    card_url: str | None = None
    card_sha256: str
    etag: str | None = None
    last_modified: str | None = None
    created_at: datetime
    updated_at: datetime
    fetched_at: datetime
    verification: VerificationRecord = Field(default_factory=VerificationRecord)

    def to_api(self) -> dict[str, Any]:
        """The admin API's snake_case view of this agent (without the raw card)."""
        card = self.card
        return {
            "id": self.id,
            "name": card.name,
            "description": card.description,
            "version": card.version,
            "card_format": card.card_format,
            "protocol_versions": card.protocol_versions,
            "provider": card.provider.model_dump() if card.provider else None,
            "documentation_url": card.documentation_url,
            "icon_url": card.icon_url,
            "interfaces": [i.model_dump() for i in card.interfaces],
            "capabilities": card.capabilities.model_dump(),
            "default_input_modes": card.default_input_modes,
            "default_output_modes": card.default_output_modes,
            "skills": [s.model_dump() for s in card.skills],
            "source": {"kind": self.source, "url": self.source_url},
            "card_url": self.card_url,
            "card_sha256": self.card_sha256,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "fetched_at": iso(self.fetched_at),
            "verification": self.verification.model_dump(),
        }


def as_utc(value: datetime) -> datetime:
    """Aware UTC (SQLite gives back naive datetimes, which are UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def iso(value: datetime) -> str:
    """ISO 8601 in UTC with a ``Z`` (naive values, as SQLite returns them, are UTC)."""
    return as_utc(value).isoformat().replace("+00:00", "Z")
