"""The carry key: where a member one A2A version cannot express travels through the other.

Translating 0.3 <-> 1.0 (:mod:`router.compat.translate`, :mod:`router.compat.push`), a member
with no counterpart is kept in the nearest ``metadata`` under :data:`CARRY_KEY` and put back
on the way back, so the round trip 0.3 -> 1.0 -> 0.3 gives back what went in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CARRY_KEY", "carried_values", "carry", "uncarry"]

CARRY_KEY = "urn:a2a-switchboard:translation:v1"
"""The ``metadata`` key under which members with no counterpart travel (and come back)."""


def carry(obj: dict[str, Any], values: Mapping[str, Any]) -> None:
    """Put ``values`` under ``obj["metadata"][CARRY_KEY]`` (``obj`` is a fresh copy).

    An empty ``metadata: {}`` the object had is remembered (``"metadata": {}`` in the carried
    values), so that :func:`uncarry` leaves it rather than dropping it."""
    if not values:
        return
    metadata = dict(obj.get("metadata") or {})
    carried = dict(metadata.get(CARRY_KEY) or {})
    if obj.get("metadata") == {}:
        carried["metadata"] = {}
    carried.update(values)
    metadata[CARRY_KEY] = carried
    obj["metadata"] = metadata


def uncarry(obj: dict[str, Any]) -> dict[str, Any]:
    """Take what :func:`carry` put in ``obj`` (a fresh copy) out of it again."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get(CARRY_KEY), dict):
        return {}
    metadata = dict(metadata)
    carried = dict(metadata.pop(CARRY_KEY))
    keep_empty = carried.pop("metadata", None) == {}
    if metadata or keep_empty:
        obj["metadata"] = metadata
    else:
        del obj["metadata"]
    return carried


def carried_values(obj: Any) -> dict[str, Any]:
    """What :func:`carry` put in ``obj``, read without changing it."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    carried = metadata.get(CARRY_KEY) if isinstance(metadata, dict) else None
    return carried if isinstance(carried, dict) else {}
