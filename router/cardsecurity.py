"""The security a card served by the router declares: how a client authenticates to
Switchboard (``SWITCHBOARD_CLIENT_AUTH``), in the shape of each A2A version.

- A2A 1.0: ``securitySchemes`` of wrapped schemes (``apiKeySecurityScheme``,
  ``httpAuthSecurityScheme``, ``openIdConnectSecurityScheme``), ``securityRequirements``
  (``[{"schemes": {name: {"list": []}}}]``, one entry per alternative) and
  ``capabilities.extendedAgentCard``.
- A2A 0.3 (and a client that names no version: the 1.x SDK reads these too): ``securitySchemes``
  tagged by ``type``, ``security`` (``[{name: []}]``) and
  ``supportsAuthenticatedExtendedCard``.

With client authentication off the cards declare nothing (and no extended card).
"""

from __future__ import annotations

from typing import Any

from registry.access.authenticate import API_KEY_HEADER
from registry.settings import Settings
from router.protocol.versions import Version

__all__ = ["SECURITY_FIELDS", "with_security"]

SECURITY_FIELDS = (
    "securitySchemes",
    "security",
    "securityRequirements",
    "supportsAuthenticatedExtendedCard",
)
"""The card members :func:`with_security` sets (an agent's own are replaced)."""


def _schemes(settings: Settings) -> dict[str, dict[str, Any]]:
    """The 0.3 shape of each accepted scheme, by name."""
    modes = settings.client_auth_modes()
    out: dict[str, dict[str, Any]] = {}
    if "api-key" in modes:
        out["apiKey"] = {
            "type": "apiKey",
            "in": "header",
            "name": API_KEY_HEADER,
            "description": "A Switchboard API key (also accepted as Authorization: Bearer).",
        }
    if "jwt" in modes:
        out["bearer"] = {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": f"A JWT issued by {settings.jwt_issuer}.",
        }
        if not settings.jwt_jwks_url and settings.jwt_issuer:
            discovery = settings.jwt_issuer.rstrip("/") + "/.well-known/openid-configuration"
            out["oidc"] = {"type": "openIdConnect", "openIdConnectUrl": discovery}
    return out


def _v1_scheme(scheme: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in scheme.items() if k != "type"}
    if scheme["type"] == "apiKey":
        body["location"] = body.pop("in")
        return {"apiKeySecurityScheme": body}
    if scheme["type"] == "http":
        return {"httpAuthSecurityScheme": {**body, "scheme": "Bearer"}}
    return {"openIdConnectSecurityScheme": body}


def with_security(card: dict[str, Any], settings: Settings, version: Version | None) -> None:
    """Set in ``card`` (in place) the security members of a card served by the router, in
    ``version``'s shape (None: the shape both SDKs read); with client authentication off,
    remove nothing and add nothing."""
    schemes = _schemes(settings)
    if not schemes:
        return
    for name in SECURITY_FIELDS:
        card.pop(name, None)
    capabilities = card.setdefault("capabilities", {})
    capabilities.pop("extendedAgentCard", None)
    # oidc only tells where the bearer token comes from: the bearer scheme is the requirement
    required = [name for name in schemes if name != "oidc"]
    if version == "1.0":
        card["securitySchemes"] = {name: _v1_scheme(s) for name, s in schemes.items()}
        card["securityRequirements"] = [{"schemes": {name: {"list": []}}} for name in required]
        capabilities["extendedAgentCard"] = True
        return
    card["securitySchemes"] = schemes
    card["security"] = [{name: []} for name in required]
    card["supportsAuthenticatedExtendedCard"] = True
