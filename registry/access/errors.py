"""Why a caller was not let in: :class:`AuthError` (no or bad credentials: HTTP 401)."""

from __future__ import annotations

__all__ = ["AuthError"]


class AuthError(Exception):
    """No credentials, or credentials that do not prove who is calling.

    ``reason`` is a stable code for logs and error data (``missing``, ``malformed``,
    ``unknown_key``, ``revoked``, ``expired``, ``bad_signature``, ``bad_claims``,
    ``unavailable``, ...); the message says what to do, never echoes the credential.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
