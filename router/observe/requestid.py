"""Request identity: every request's id, and what is known of the A2A call it carries.

Each request has an :class:`Observed` in a context variable (:func:`current`), set by
:func:`router.observe.http.request_id_middleware` for HTTP (by
:func:`router.observe.metrics.observed_handle` for gRPC): its id is the client's
``X-Request-ID`` when that is sane (:func:`sane_request_id`: 1 to 128 characters of letters,
digits and ``-_.:/+=@``), a new one otherwise. The id is returned in the response's
``X-Request-ID``, sent to agents (:func:`router.forward.headers.forward_headers`) and put in every
log record written meanwhile (:class:`RequestContextFilter`). The routing core fills in the
A2A facts (method, version, agent, tier, task, outcome) as it learns them.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

__all__ = [
    "REQUEST_ID_HEADER",
    "Observed",
    "RequestContextFilter",
    "current",
    "current_request_id",
    "new_request_id",
    "observing",
    "sane_request_id",
]

REQUEST_ID_HEADER = "X-Request-ID"
_SANE = re.compile(r"[A-Za-z0-9\-_.:/+=@]{1,128}")


@dataclass
class Observed:
    """What is known of one request, filled in as it is handled (None: not known, or not an
    A2A call). ``upstream_seconds`` sums the time spent waiting for agents."""

    request_id: str
    method: str | None = None
    version: str | None = None
    agent_id: str | None = None
    tier: str | None = None
    task_id: str | None = None
    outcome: str | None = None
    duration: float | None = None
    upstream_seconds: float = 0.0


_CURRENT: ContextVar[Observed | None] = ContextVar("switchboard_request", default=None)


def current() -> Observed | None:
    """The request being handled in this context, if any."""
    return _CURRENT.get()


def current_request_id() -> str | None:
    """The id of the request being handled in this context, if any."""
    observed = _CURRENT.get()
    return observed.request_id if observed is not None else None


def new_request_id() -> str:
    """A fresh request id (32 hex digits)."""
    return uuid.uuid4().hex


def sane_request_id(value: str | None) -> str | None:
    """``value`` if it can be used as a request id (bounded length and characters), else None."""
    if value is not None and _SANE.fullmatch(value):
        return value
    return None


def observing(observed: Observed) -> Callable[[], None]:
    """Make ``observed`` the current request; the returned function restores the previous one."""
    token = _CURRENT.set(observed)
    return lambda: _CURRENT.reset(token)


class RequestContextFilter:
    """A logging filter (for handlers) that puts the current request's fields on each record
    as attributes (``request_id``, ``method``, ``agent_id``, ...), unless already set."""

    def filter(self, record: Any) -> bool:
        """Add the fields; never drops a record."""
        observed = _CURRENT.get()
        if observed is None:
            return True
        fields = record.__dict__  # what ``hasattr`` and ``setattr`` would see and change
        for name in _KNOWN:
            value = getattr(observed, name)
            if value is not None and name not in fields:
                fields[name] = value
        if observed.duration is not None:
            if "duration_ms" not in fields:
                fields["duration_ms"] = round(observed.duration * 1000, 3)
            if "upstream_ms" not in fields:
                fields["upstream_ms"] = round(observed.upstream_seconds * 1000, 3)
        return True


_KNOWN = ("request_id", "method", "version", "agent_id", "tier", "task_id", "outcome")
"""The fields a record carries as they are (when known); ``duration_ms`` and ``upstream_ms``
follow once the request's duration is known."""
