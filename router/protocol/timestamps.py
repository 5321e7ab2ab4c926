"""Timestamps as A2A carries them: RFC 3339 (the ProtoJSON form of google.protobuf.Timestamp,
1.0) and ISO 8601 (0.3 agents), read as aware UTC datetimes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

__all__ = ["parse_timestamp", "status_timestamp"]


_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)


def parse_timestamp(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (the ProtoJSON form of google.protobuf.Timestamp) as an aware
    UTC datetime (fractions beyond microseconds are cut); None if ``value`` is not one."""
    found = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        return None
    year, month, day, hour, minute, second = (int(part) for part in found.groups()[:6])
    fraction, zulu, sign, off_hours, off_minutes = found.groups()[6:]
    micros = int((fraction or "").ljust(6, "0")[:6])
    try:
        if zulu:
            zone = UTC
        else:
            offset = timedelta(hours=int(off_hours), minutes=int(off_minutes))
            zone = timezone(-offset if sign == "-" else offset)
        moment = datetime(year, month, day, hour, minute, second, micros, tzinfo=zone)
        return moment.astimezone(UTC)
    except (ValueError, OverflowError):  # Feb 30, second 60, offsets of a day or more
        return None


def status_timestamp(task: Mapping[str, Any]) -> datetime | None:
    """``task.status.timestamp`` (either version) as an aware UTC datetime, if it has a
    readable one (RFC 3339; a 0.3 agent's ISO 8601 time without an offset is taken as
    UTC)."""
    status = task.get("status")
    stamp = status.get("timestamp") if isinstance(status, dict) else None
    if not isinstance(stamp, str):
        return None
    parsed = parse_timestamp(stamp)
    if parsed is not None:
        return parsed
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
