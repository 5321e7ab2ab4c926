"""Error types shared by the registry: each carries a stable code, a message and details.

The admin API turns a :class:`RegistryError` into ``{"error": {"code", "message", "details"}}``
with the error's HTTP status; the CLI prints the message.
"""

from __future__ import annotations

from typing import Any


def number(value: float) -> str:
    """``value`` for a message: a whole number as an integer (``2592000``, not ``2.592e+06``
    as ``:g`` writes it), any other in its shortest exact form (``0.5``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class RegistryError(Exception):
    """Base class: a failure a caller can act on, never a stack trace.

    ``code`` is a stable snake_case identifier operators can script against,
    ``status`` the HTTP status the admin API answers with.
    """

    status: int = 400
    code: str = "bad_request"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        details: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.details = details

    def to_json(self) -> dict[str, Any]:
        """The admin API's error body."""
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class CardError(RegistryError):
    """An agent card that cannot be read: ``details`` lists ``{"field", "problem"}`` entries."""

    status = 422
    code = "invalid_card"


class CrawlError(RegistryError):
    """Fetching a card (or another document) from an agent failed; ``code`` says how."""

    status = 422
    code = "fetch_failed"


class NotFound(RegistryError):
    """The named resource does not exist."""

    status = 404
    code = "not_found"


class Conflict(RegistryError):
    """The resource already exists (e.g. an agent registered twice)."""

    status = 409
    code = "conflict"


def agent_not_found(agent_id: str) -> NotFound:
    """The :class:`NotFound` of an agent id the registry does not know."""
    return NotFound(f"no agent with id {agent_id!r}", details={"id": agent_id})
