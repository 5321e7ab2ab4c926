"""What changed between two versions of an indexed agent: the diff stored with each revision.

The diff compares the normalized cards (so a re-ordered or re-formatted card that means the
same has an empty diff) plus the verification status. Only sections with a change appear::

    {
      "fields": {"description": {"from": "..", "to": ".."}},
      "skills": {"added": ["ocr"], "removed": [], "changed": [{"id": "..", "fields": [..]}]},
      "interfaces": {"added": [{..}], "removed": [{..}]},
      "capabilities": {"streaming": {"from": false, "to": true}},
      "default_input_modes": {"added": [..], "removed": [..]},
      "default_output_modes": {"added": [..], "removed": [..]},
      "verification": {"from": "unsigned", "to": "verified"}
    }
"""

from __future__ import annotations

from typing import Any

from registry.cards import AgentCard, Interface
from registry.records import AgentRecord

_FIELDS = ("name", "description", "version", "documentation_url", "icon_url", "card_format")
_SKILL_FIELDS = ("name", "description", "tags", "examples", "input_modes", "output_modes")


def agent_diff(old: AgentRecord, new: AgentRecord) -> dict[str, Any]:
    """The changes from ``old`` to ``new`` (empty when the indexed agent is the same)."""
    out = card_diff(old.card, new.card)
    if old.verification.status != new.verification.status:
        out["verification"] = {"from": old.verification.status, "to": new.verification.status}
    return out


def card_diff(old: AgentCard, new: AgentCard) -> dict[str, Any]:
    """The changes from card ``old`` to card ``new``."""
    out: dict[str, Any] = {}
    fields = {
        name: {"from": getattr(old, name), "to": getattr(new, name)}
        for name in _FIELDS
        if getattr(old, name) != getattr(new, name)
    }
    if old.provider != new.provider:
        fields["provider"] = {
            "from": old.provider.model_dump() if old.provider else None,
            "to": new.provider.model_dump() if new.provider else None,
        }
    if fields:
        out["fields"] = fields
    if skills := _skills(old, new):
        out["skills"] = skills
    if interfaces := _added_removed(
        [_interface(i) for i in old.interfaces], [_interface(i) for i in new.interfaces]
    ):
        out["interfaces"] = interfaces
    old_caps, new_caps = old.capabilities.model_dump(), new.capabilities.model_dump()
    capabilities = {
        name: {"from": old_caps[name], "to": new_caps[name]}
        for name in old_caps
        if old_caps[name] != new_caps[name]
    }
    if capabilities:
        out["capabilities"] = capabilities
    for name in ("default_input_modes", "default_output_modes"):
        if modes := _added_removed(getattr(old, name), getattr(new, name)):
            out[name] = modes
    return out


def _skills(old: AgentCard, new: AgentCard) -> dict[str, Any]:
    before = {s.id: s for s in old.skills}
    after = {s.id: s for s in new.skills}
    changed = []
    for skill_id in after.keys() & before.keys():
        fields = [
            f for f in _SKILL_FIELDS if getattr(before[skill_id], f) != getattr(after[skill_id], f)
        ]
        if fields:
            changed.append({"id": skill_id, "fields": fields})
    added = [s for s in after if s not in before]
    removed = [s for s in before if s not in after]
    if not (added or removed or changed):
        return {}
    changed.sort(key=lambda c: c["id"])
    return {"added": added, "removed": removed, "changed": changed}


def _interface(interface: Interface) -> dict[str, Any]:
    return interface.model_dump()


def _added_removed(old: list[Any], new: list[Any]) -> dict[str, list[Any]]:
    added = [item for item in new if item not in old]
    removed = [item for item in old if item not in new]
    return {"added": added, "removed": removed} if added or removed else {}
