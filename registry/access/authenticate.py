"""Who sent a request: its credentials checked, a :class:`~registry.access.principal.Principal`
out. One :class:`Authenticator` serves the admin API and the router's A2A endpoints.

Credentials, in the order they are looked at:

- ``X-API-Key: <key>``: an API key (``SWITCHBOARD_CLIENT_AUTH`` includes ``api-key``).
- ``Authorization: Bearer <token>``: the admin token or the read token (always), an API key
  (``sbk_...``, with ``api-key``) or a JWT (with ``jwt``).

No credentials is not an error here (:meth:`Authenticator.authenticate` answers None: each
endpoint decides whether it needs a caller); credentials that do not prove who is calling
are (:class:`~registry.access.errors.AuthError`), even where none were needed.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Protocol

from registry.access.errors import AuthError
from registry.access.principal import ADMIN, READER, Principal
from registry.settings import Settings

__all__ = ["API_KEY_HEADER", "API_KEY_PREFIX", "Authenticator", "KeyChecker", "TokenChecker"]

API_KEY_HEADER = "X-API-Key"
API_KEY_PREFIX = "sbk_"
"""How an API key starts, which tells it apart from a JWT in an ``Authorization`` header."""

_MAX_CREDENTIAL = 16 * 1024

ADMIN_TOKEN = Principal("admin-token", roles=frozenset({ADMIN}), method="admin-token")
READ_TOKEN = Principal("read-token", roles=frozenset({READER}), method="read-token")


class KeyChecker(Protocol):
    """Checks an API key (:class:`registry.access.apikeys.ApiKeys`)."""

    async def authenticate(self, key: str) -> Principal:
        """The key's principal; AuthError when it is unknown, revoked or expired."""
        ...


class TokenChecker(Protocol):
    """Checks a JWT bearer token (:class:`registry.access.jwt.JwtVerifier`)."""

    async def verify(self, token: str) -> Principal:
        """The token's principal; AuthError when it does not verify."""
        ...


class Authenticator:
    """The credentials of a request, checked against the admin and read tokens, the API keys
    (when ``api-key`` is on) and the JWT issuer (when ``jwt`` is on)."""

    def __init__(
        self,
        settings: Settings,
        *,
        keys: KeyChecker | None = None,
        tokens: TokenChecker | None = None,
    ) -> None:
        modes = settings.client_auth_modes()
        self.settings = settings
        self.keys = keys if "api-key" in modes else None
        self.tokens = tokens if "jwt" in modes else None
        self._fixed = [
            (token.encode(), principal)
            for token, principal in (
                (settings.admin_token, ADMIN_TOKEN),
                (settings.read_token, READ_TOKEN),
            )
            if token
        ]

    @property
    def client_auth(self) -> bool:
        """Whether A2A clients must authenticate (``SWITCHBOARD_CLIENT_AUTH`` is not none)."""
        return self.keys is not None or self.tokens is not None

    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value of a 401: the schemes this server accepts."""
        parts = ['Bearer realm="switchboard"']
        if self.keys is not None:
            parts.append(f'ApiKey realm="switchboard", header="{API_KEY_HEADER}"')
        return ", ".join(parts)

    async def authenticate(self, headers: Mapping[str, str]) -> Principal | None:
        """The caller the headers prove, None when they carry no credentials; AuthError for
        credentials that are malformed, unknown, revoked, expired or do not verify."""
        api_key = headers.get(API_KEY_HEADER)
        authorization = headers.get("Authorization")
        if api_key is not None:
            return await self._api_key(api_key.strip())
        if authorization is None:
            return None
        scheme, _, credential = authorization.strip().partition(" ")
        credential = credential.strip()
        if scheme.lower() != "bearer" or not credential:
            raise AuthError(
                "malformed",
                "send 'Authorization: Bearer <token>'"
                + (f" or '{API_KEY_HEADER}: <key>'" if self.keys is not None else ""),
            )
        if len(credential) > _MAX_CREDENTIAL:
            raise AuthError("malformed", "the bearer token is too long")
        given = credential.encode("utf-8", "surrogateescape")  # headers may hold any bytes
        for token, principal in self._fixed:
            if hmac.compare_digest(given, token):
                return principal
        if credential.startswith(API_KEY_PREFIX) and self.keys is not None:
            return await self._api_key(credential)
        if self.tokens is not None and credential.count(".") == 2:
            return await self.tokens.verify(credential)
        raise AuthError("unknown_credential", "the bearer token is not valid here")

    async def _api_key(self, key: str) -> Principal:
        if self.keys is None:
            raise AuthError("unknown_credential", "API keys are not accepted here")
        if not key or len(key) > _MAX_CREDENTIAL:
            raise AuthError("malformed", "the API key is empty or too long")
        return await self.keys.authenticate(key)
