"""Mapping between an :class:`~registry.records.AgentRecord` and its table rows: the agent
row (with the raw card bytes and the verification), its interfaces, skills, tags and modes,
and a card revision; and back from rows to records.
"""

from __future__ import annotations

from typing import Any

from registry.cards import AgentCard, Capabilities, Interface, Provider, Skill
from registry.records import AgentRecord, VerificationRecord, as_utc
from registry.tables import (
    AgentRow,
    CardRevisionRow,
    InterfaceRow,
    SkillModeRow,
    SkillRow,
    SkillTagRow,
)


def revision_row(record: AgentRecord, raw: bytes, diff: dict[str, Any] | None) -> CardRevisionRow:
    """A card revision of ``record`` with its bytes and ``diff`` (what changed)."""
    return CardRevisionRow(**revision_values(record, raw, diff))


def revision_values(record: AgentRecord, raw: bytes, diff: dict[str, Any] | None) -> dict[str, Any]:
    """The values of :func:`revision_row` (every column but the key), to insert as they are."""
    return {
        "agent_id": record.id,
        "sha256": record.card_sha256,
        "fetched_at": record.fetched_at,
        "card_url": record.card_url,
        "raw": raw,
        "diff": diff,
        "verification_status": record.verification.status,
    }


def agent_row(record: AgentRecord, raw: bytes) -> AgentRow:
    """The ``agents`` row of ``record`` with its card bytes ``raw``."""
    return AgentRow(**agent_values(record, raw))


def agent_values(record: AgentRecord, raw: bytes) -> dict[str, Any]:
    """The values of :func:`agent_row` (every column), to insert as they are."""
    card = record.card
    caps = card.capabilities
    verification = record.verification
    return {
        "id": record.id,
        "name": card.name,
        "description": card.description,
        "version": card.version,
        "card_format": card.card_format,
        "provider_organization": card.provider.organization if card.provider else None,
        "provider_url": card.provider.url if card.provider else None,
        "documentation_url": card.documentation_url,
        "icon_url": card.icon_url,
        "streaming": caps.streaming,
        "push_notifications": caps.push_notifications,
        "state_transition_history": caps.state_transition_history,
        "extended_card": caps.extended_card,
        "extensions": caps.extensions,
        "default_input_modes": card.default_input_modes,
        "default_output_modes": card.default_output_modes,
        "signatures": card.signatures,
        "source": record.source,
        "source_url": record.source_url,
        "card_url": record.card_url,
        "card_sha256": record.card_sha256,
        "card_raw": raw,
        "etag": record.etag,
        "last_modified": record.last_modified,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "fetched_at": record.fetched_at,
        "verification_status": verification.status,
        "verification_kid": verification.kid,
        "verification_reason": verification.reason,
        "verification_key_source": verification.key_source,
        "verification_payload_form": verification.payload_form,
        "verification_uncovered": list(verification.uncovered_fields),
    }


Values = dict[Any, list[dict[str, Any]]]
"""Rows to insert as plain values, by table (``SomeRow.__table__``)."""


def child_values(record: AgentRecord) -> Values:
    """The index rows of ``record`` (interfaces, skills, skill tags and skill modes) as the
    values to insert, by table: plain dicts, no ORM objects (a crawl writes thousands)."""
    agent_id = record.id
    interfaces = [
        {
            "agent_id": agent_id,
            "position": n,
            "url": i.url,
            "binding": i.binding,
            "protocol_version": i.protocol_version,
            "tenant": i.tenant,
        }
        for n, i in enumerate(record.card.interfaces)
    ]
    skills: list[dict[str, Any]] = []
    tags: list[dict[str, Any]] = []
    modes: list[dict[str, Any]] = []
    for n, skill in enumerate(record.card.skills):
        skill_id = skill.id
        skills.append(
            {
                "agent_id": agent_id,
                "skill_id": skill_id,
                "position": n,
                "name": skill.name,
                "description": skill.description,
                "examples": list(skill.examples),
            }
        )
        tags += (
            {"agent_id": agent_id, "skill_id": skill_id, "position": m, "tag": tag}
            for m, tag in enumerate(skill.tags)
        )
        for direction, media in (("input", skill.input_modes), ("output", skill.output_modes)):
            modes += (
                {
                    "agent_id": agent_id,
                    "skill_id": skill_id,
                    "direction": direction,
                    "position": m,
                    "media_type": mode,
                }
                for m, mode in enumerate(media)
            )
    return {
        InterfaceRow.__table__: interfaces,  # type: ignore[attr-defined]
        SkillRow.__table__: skills,  # type: ignore[attr-defined]
        SkillTagRow.__table__: tags,  # type: ignore[attr-defined]
        SkillModeRow.__table__: modes,  # type: ignore[attr-defined]
    }


def records_from(rows: dict[str, list[Any]]) -> list[AgentRecord]:
    """The records of the rows of every agent table (by table name), ordered by id."""
    interfaces: dict[str, list[InterfaceRow]] = {}
    for row in sorted(rows["agent_interfaces"], key=lambda r: r.position):
        interfaces.setdefault(row.agent_id, []).append(row)
    tags: dict[tuple[str, str], list[str]] = {}
    for row in sorted(rows["skill_tags"], key=lambda r: r.position):
        tags.setdefault((row.agent_id, row.skill_id), []).append(row.tag)
    modes: dict[tuple[str, str, str], list[str]] = {}
    for row in sorted(rows["skill_modes"], key=lambda r: r.position):
        modes.setdefault((row.agent_id, row.skill_id, row.direction), []).append(row.media_type)
    skills: dict[str, list[Skill]] = {}
    for row in sorted(rows["skills"], key=lambda r: r.position):
        key = (row.agent_id, row.skill_id)
        skills.setdefault(row.agent_id, []).append(
            Skill(
                id=row.skill_id,
                name=row.name,
                description=row.description,
                tags=tags.get(key, []),
                examples=list(row.examples or []),
                input_modes=modes.get((*key, "input"), []),
                output_modes=modes.get((*key, "output"), []),
            )
        )
    out = []
    for row in sorted(rows["agents"], key=lambda r: r.id):
        provider = None
        if row.provider_organization is not None or row.provider_url is not None:
            provider = Provider(organization=row.provider_organization, url=row.provider_url)
        card = AgentCard(
            card_format=row.card_format,
            name=row.name,
            description=row.description,
            version=row.version,
            provider=provider,
            documentation_url=row.documentation_url,
            icon_url=row.icon_url,
            interfaces=[
                Interface(
                    url=i.url,
                    binding=i.binding,
                    protocol_version=i.protocol_version,
                    tenant=i.tenant,
                )
                for i in interfaces.get(row.id, [])
            ],
            capabilities=Capabilities(
                streaming=row.streaming,
                push_notifications=row.push_notifications,
                state_transition_history=row.state_transition_history,
                extended_card=row.extended_card,
                extensions=list(row.extensions or []),
            ),
            default_input_modes=list(row.default_input_modes or []),
            default_output_modes=list(row.default_output_modes or []),
            skills=skills.get(row.id, []),
            signatures=list(row.signatures or []),
        )
        out.append(
            AgentRecord(
                id=row.id,
                card=card,
                source=row.source,
                source_url=row.source_url,
                card_url=row.card_url,
                card_sha256=row.card_sha256,
                etag=row.etag,
                last_modified=row.last_modified,
                created_at=as_utc(row.created_at),
                updated_at=as_utc(row.updated_at),
                fetched_at=as_utc(row.fetched_at),
                verification=VerificationRecord(
                    status=row.verification_status,
                    kid=row.verification_kid,
                    reason=row.verification_reason,
                    key_source=row.verification_key_source,
                    payload_form=row.verification_payload_form,
                    uncovered_fields=list(row.verification_uncovered or []),
                ),
            )
        )
    return out
